/** The agent loop as registry input: a generation task per Submission, a tool task per tool call. */
import { DefinitionError } from "../errors.ts";
import type { SubmissionTask } from "../registry.ts";
import type { TaskDefinition } from "../tasks/define-task.ts";
import type { ToolDefinition } from "./define-tool.ts";
import { toolSpec } from "./define-tool.ts";
import { followUpOf, GENERATE_TASK, type GenerationOptions, generationTask } from "./generation-task.ts";
import type { Model } from "./model.ts";
import { toolTask } from "./tool-task.ts";

export interface AgentOptions extends Omit<GenerationOptions, "tools" | "toolSpecs" | "model"> {
  readonly model: Model;
  // biome-ignore lint/suspicious/noExplicitAny: tools of any argument type; each validates its own input
  readonly tools?: readonly ToolDefinition<any>[];
}

export interface Agent {
  // biome-ignore lint/suspicious/noExplicitAny: task kinds of any input type
  readonly tasks: readonly TaskDefinition<any, any>[];
  readonly submissionTask: SubmissionTask;
}

/**
 * Builds the agent loop's task kinds. Spread it into `createRegistry`.
 *
 * @example
 * const agent = createAgent({ model: scriptedModel([...]), tools: [sendEmail] });
 * const registry = createRegistry({ ...agent, documents: [emailPlan] });
 */
export function createAgent(options: AgentOptions): Agent {
  const tools = new Map<string, ToolDefinition<unknown>>();
  for (const tool of options.tools ?? []) {
    if (tools.has(tool.name)) throw new DefinitionError(`tool "${tool.name}" is defined twice`);
    tools.set(tool.name, tool as ToolDefinition<unknown>);
  }
  return {
    tasks: [
      generationTask({ ...options, tools, toolSpecs: [...tools.values()].map(toolSpec) }),
      toolTask(tools),
    ],
    // The turn's context position is the Submission's own entry: fixed in the commit that accepts it.
    submissionTask: (submission) => ({
      kind: GENERATE_TASK,
      input: { conversationId: submission.conversationId, throughSeq: submission.entrySeq + 1 },
      followUp: followUpOf(options, submission.conversationId),
    }),
  };
}
