/**
 * durable-agent: a durable execution kernel for AI agents. Progress lives in committed data (Entries,
 * Documents, Tasks, Submissions), so a new process continues exactly where the work stood.
 */

export { aiSdkModel } from "./agent/ai-sdk.ts";
export type { CompactionOptions } from "./agent/compaction.ts";
export { estimateTokens } from "./agent/compaction.ts";
export type { ContextPolicy } from "./agent/context.ts";
export { buildMessages, contextStart, DEFAULT_MAX_TOOL_RESULT_CHARS } from "./agent/context.ts";
export type { Agent, AgentOptions } from "./agent/create-agent.ts";
export { createAgent } from "./agent/create-agent.ts";
export type { ToolContext, ToolDefinition } from "./agent/define-tool.ts";
export { defineTool, toolSpec } from "./agent/define-tool.ts";
export type { ExecutedCall, ExecutorOptions, ExecutorTarget } from "./agent/executor.ts";
export { executePlacedCalls } from "./agent/executor.ts";
export type { StreamDocument, TurnResult, TurnUsage } from "./agent/generation-task.ts";
export { GENERATE_TASK, streamDocumentId } from "./agent/generation-task.ts";
export type {
  GenerateOptions,
  Model,
  ModelMessage,
  ModelRequest,
  ModelResponse,
  ModelUsage,
  ToolSpec,
} from "./agent/model.ts";
export { ModelError } from "./agent/model.ts";
export type { OpenAiCompatibleOptions } from "./agent/openai-compatible.ts";
export { openAiCompatibleModel } from "./agent/openai-compatible.ts";
export type { HostKind } from "./agent/placement.ts";
export { doneKey, runOnKey, runsHere, takePlacedCalls } from "./agent/placement.ts";
export type { ScriptedModelOptions, ScriptedTurn } from "./agent/scripted-model.ts";
export { scriptedModel } from "./agent/scripted-model.ts";
export type { ToolOutcome, ToolResult } from "./agent/tool-finish.ts";
export { progressDocumentId, RESULT_INLINE_MAX_OUTPUT } from "./agent/tool-finish.ts";
export { TOOL_TASK } from "./agent/tool-task.ts";
export type { Clock, IdSource, TimerHandle, Timers } from "./clock.ts";
export { ManualClock, ManualTimers, randomIds, sequentialIds, systemClock, systemTimers } from "./clock.ts";
export type { DocumentDefinition } from "./documents/define-document.ts";
export { defineDocument, KERNEL_DOCUMENT_TYPES } from "./documents/define-document.ts";
export { applyJsonPatch, diffJson } from "./documents/json-patch.ts";
export * from "./errors.ts";
export * from "./records/schemas.ts";
export { describeIssues } from "./records/validate.ts";
export type { RegistryInput, SubmissionTask, TaskResolution } from "./registry.ts";
export { createRegistry, Registry } from "./registry.ts";
export type { EdgeReplicaOptions } from "./replication/edge-replica.ts";
export { edgeReplica } from "./replication/edge-replica.ts";
export type { EnvironmentProblem, EnvironmentReport } from "./replication/environment.ts";
export { assertCanContinue, checkEnvironment } from "./replication/environment.ts";
export type { FollowRemoteOptions, RemoteFollower } from "./replication/follow-remote.ts";
export { followRemote } from "./replication/follow-remote.ts";
export type { LinkOptions, LinkStatus } from "./replication/link-session.ts";
export { LinkedSession, linkSession } from "./replication/link-session.ts";
export type { LocalInput, OnKept, WithheldSignal } from "./replication/local-inputs.ts";
export type {
  ClaimRequest,
  Grant,
  Ownership,
  PushAck,
  PushRequest,
  ReleaseRequest,
  ReplicaRemote,
} from "./replication/protocol.ts";
export {
  ClaimRequestSchema,
  DEFAULT_LEASE_MS,
  EDGE_HOLDER,
  MAX_PUSH_COMMITS,
  PushRequestSchema,
  ReleaseRequestSchema,
} from "./replication/protocol.ts";
export type { OwnershipStore, ReplicaHostOptions } from "./replication/replica-host.ts";
export { memoryOwnership, ownedElsewhere, ReplicaHost } from "./replication/replica-host.ts";
export type { ServerEvent } from "./server-events.ts";
export { serverEvents } from "./server-events.ts";
export type { CommitResult } from "./session/commit-pipeline.ts";
export type {
  AppSpawnOptions,
  BuildCommit,
  BuildProgress,
  CommitOptions,
  Draft,
  DraftReader,
  EntryLinks,
  ProgressDraft,
} from "./session/draft-types.ts";
export { DEFAULT_ENTRY_TAIL, DEFAULT_SETTLED } from "./session/limits.ts";
export { openSession } from "./session/open-session.ts";
export type { OpenSessionOptions, SessionStatus, WaitOptions } from "./session/options.ts";
export type { PendingWait } from "./session/pending.ts";
export { pendingWaits } from "./session/pending.ts";
export type { ArchivedItem, CollectResult, RetentionPolicy } from "./session/retention.ts";
export { Session } from "./session/session.ts";
export { SessionReads } from "./session/session-reads.ts";
export type { BlockedRecord, DocumentState } from "./session/state.ts";
export type { SubmitInput, SubmitOptions } from "./session/submit.ts";
export { parseSubmitInput, SubmitInputSchema } from "./session/submit.ts";
export type { ChangeListener, SubscribeOptions, Unsubscribe } from "./session/subscriptions.ts";
export type { ConversationView, DocumentView, SessionView, ViewLimits, ViewOptions } from "./session/view.ts";
export { applyChangeToView, DEFAULT_VIEW_LIMITS, emptyView } from "./session/view.ts";
export type { ApprovalDecision, SignalDefinition } from "./signals/define-signal.ts";
export { ApprovalSchema, defineSignal } from "./signals/define-signal.ts";
export type { SignalHost, SignalOptions, SignalReceipt } from "./signals/deliver.ts";
export { MAX_SIGNAL_PAYLOAD_BYTES, receiptFor } from "./signals/deliver.ts";
export type { IndexedDbStorageOptions } from "./storage/indexeddb-storage.ts";
export { IndexedDbStorage, indexedDbStorage } from "./storage/indexeddb-storage.ts";
export type { MemoryStorageOptions, WriteHook } from "./storage/memory-storage.ts";
export { MemoryStorage, memoryStorage } from "./storage/memory-storage.ts";
export type { KeyPart, RowWrite, Table } from "./storage/rows.ts";
export type { SessionSnapshot } from "./storage/session-export.ts";
export { exportSession, importSession } from "./storage/session-export.ts";
export type {
  CommitGuard,
  ExportedRow,
  OpenRequest,
  RawSession,
  SessionImport,
  Storage,
  StorageOptions,
  StoredChanges,
  StoredDocument,
  StoredItem,
  StoredRecord,
  StoredSession,
} from "./storage/storage.ts";
export type {
  AnyPhaseData,
  JoinPolicy,
  Phase,
  PhaseContext,
  PhaseDataMap,
  PhaseName,
  Received,
  SpawnOptions,
  TaskDefinition,
  TaskSnapshot,
  Transition,
  WaitForOptions,
} from "./tasks/define-task.ts";
export { defineTask } from "./tasks/define-task.ts";
export { turnKey } from "./tasks/follow-up.ts";
export type { NewSubmission, RecoveryEvent, TaskEvent, TaskSpec } from "./tasks/machine.ts";
export type { Preview, TextPreview } from "./tasks/preview.ts";
export type { AwaitingTask, BlockedTask, RecoveryPlan } from "./tasks/recovery.ts";
export type { FollowUp } from "./tasks/task-events.ts";
export { APPLIES_TO } from "./tasks/task-events.ts";
export type { WakeDetails, WakeInfo } from "./tasks/wake-info.ts";
export { isRunnableStatus, wakeInfoOf } from "./tasks/wake-info.ts";
export { chatMessages } from "./ui/chat-messages.ts";
export type { ChatBackend, ChatChunk, ChatMessage, ChatTransportOptions } from "./ui/chat-transport.ts";
export { assistantMessageId, chatTransport } from "./ui/chat-transport.ts";
export type { EdgeChatOptions, EdgeFollowOptions } from "./ui/edge-chat.ts";
export { EdgeRequestError, edgeChatBackend, edgeExecutorTarget, followEdgeChanges } from "./ui/edge-chat.ts";
