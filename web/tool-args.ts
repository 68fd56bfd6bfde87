/** A tool task's arguments, read from its input (`{ toolCallId, name, args }`, args as JSON text). */
export function toolArgs(input: unknown): { to?: string } | undefined {
  const args = (input as { args?: unknown } | null)?.args;
  if (typeof args !== "string") return undefined;
  try {
    return JSON.parse(args) as { to?: string };
  } catch {
    return undefined;
  }
}
