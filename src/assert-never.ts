/** Marks a switch as exhaustive: adding a case to the union without handling it is a compile error. */
export function assertNever(value: never): never {
  throw new Error(`unhandled case: ${JSON.stringify(value)}`);
}
