/**
 * Run by test/node/compiled-schemas.test.ts in a Node process started with
 * `--disallow-code-generation-from-strings` (what a page whose CSP forbids eval gets): the kernel commits,
 * refuses a bad record with the usual error, and prints what it saw as one JSON line.
 */
import { z } from "zod";
import {
  createRegistry,
  defineDocument,
  memoryStorage,
  openSession,
  sequentialIds,
} from "../../src/index.ts";
import { EntrySchema } from "../../src/records/schemas.ts";

const plan = defineDocument({ type: "plan", schema: z.object({ n: z.number().int() }) });
const session = await openSession({
  id: "locked-down",
  storage: memoryStorage(),
  registry: createRegistry({ documents: [plan] }),
  ids: sequentialIds(),
});
await session.commit((draft) => {
  draft.appendEntry("main", { kind: "note", text: "hello" });
  draft.setDocument("p", "plan", { n: 1 });
});
let refused = "";
try {
  await session.commit((draft) => draft.setDocument("p", "plan", { n: 1.5 }));
} catch (error) {
  refused = (error as Error).message;
}
const compiledHere = typeof (EntrySchema as unknown as { _zod: { bag: { validator?: unknown } } })._zod.bag
  .validator;
console.log(JSON.stringify({ version: session.version, refused, compiledHere }));
