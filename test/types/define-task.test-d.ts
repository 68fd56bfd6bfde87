/**
 * Type tests of the public task API (checked by `npm run typecheck`): phase data is typed per phase from a
 * `data` schema map or from the second type parameter, and transitions into a phase need its data type.
 */
import { z } from "zod";
import { defineTask, type Json, type PhaseContext } from "../../src/index.ts";

/** Schemas per phase: `ctx.data` is typed by the phase's schema, transitions are checked against it. */
export const fromSchemas = defineTask({
  kind: "typed",
  version: 1,
  input: z.object({ n: z.number() }),
  data: { start: z.null(), count: z.object({ total: z.number() }) },
  phases: {
    start: (ctx) => ctx.next("count", { total: ctx.input.n }),
    count: (ctx) => {
      const total: number = ctx.data.total;
      return ctx.complete(total + 1);
    },
  },
});

export const wrongData = defineTask({
  kind: "wrong",
  version: 1,
  input: z.object({}),
  data: { start: z.null(), count: z.object({ total: z.number() }) },
  phases: {
    // @ts-expect-error the count phase needs { total: number }
    start: (ctx) => ctx.next("count", { total: "many" }),
    // @ts-expect-error there is no phase "finish"
    count: (ctx) => ctx.next("finish"),
  },
});

/** A generic map instead of schemas. */
type Rounds = { ask: null; answer: { text: string } };
export const fromGenerics = defineTask<{ q: string }, Rounds>({
  kind: "generic",
  version: 1,
  input: z.object({ q: z.string() }),
  phases: {
    ask: (ctx) => ctx.next("answer", { text: ctx.input.q }),
    answer: (ctx: PhaseContext<{ q: string }, Rounds, "answer">) => ctx.complete(ctx.data.text),
  },
});

/** Without either, phase data is untyped JSON and any phase name is accepted. */
export const untyped = defineTask({
  kind: "plain",
  version: 1,
  input: z.object({}),
  phases: {
    step: (ctx) => ctx.next("step", ((ctx.data as number | null) ?? 0) + 1),
  },
});

/** A defined kind can be spread into a new version. */
export const nextVersion = defineTask({ ...untyped, version: 2, migrations: { 1: (stored) => stored } });
export const typedNextVersion = defineTask({ ...fromSchemas, version: 2 });

export const jsonResult: Json = 1;
