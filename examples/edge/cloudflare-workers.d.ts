/**
 * The one export of the platform's `cloudflare:workers` module the examples, benchmarks and test workers
 * use, so they type-check without `@cloudflare/workers-types` (an app has that package's full types).
 */
declare module "cloudflare:workers" {
  export abstract class DurableObject<Env = unknown> {
    constructor(ctx: unknown, env: Env);
    protected readonly ctx: unknown;
    protected readonly env: Env;
  }
}
