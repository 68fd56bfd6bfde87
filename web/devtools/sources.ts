/**
 * Where the devtools read a session from, always read-only, one module each: a local session's IndexedDB
 * database (`local-source.ts`), an edge session's HTTP API (`edge-source.ts`), a history file saved with
 * Export (`history-file.ts`). Each is a `SessionSource` (`session-source.ts`).
 */

export { edgeSessions, edgeSource } from "./edge-source.ts";
export { type ExportedHistory, exportHistory, fileSource, parseExportedHistory } from "./history-file.ts";
export { localDatabases, localSessions, localSource } from "./local-source.ts";
export type { SessionSource, WriterState } from "./session-source.ts";
