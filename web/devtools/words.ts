/** How the devtools write a count of things. */

/**
 * `n` and the noun, singular for one: `counted(1, "tool call")` is "1 tool call", `counted(3, "child",
 * "children")` is "3 children".
 */
export function counted(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
