/**
 * The five-email scenario for the browser demo: the same plan, campaign task and scripted model as
 * examples/five-emails, with a mail service stand-in whose log lives in its own IndexedDB database (it
 * survives tab reloads, like a real provider) and whose sends take a moment, so there is time to reload.
 */
import { openDB } from "idb";
import { asyncCampaignRegistry } from "../examples/five-emails/app.ts";
import { createAgent, createRegistry, type Registry, scriptedModel, systemTimers } from "../src/index.ts";

interface Receipt {
  messageId: string;
  to: string;
  operationId: string;
}

/** A mail provider stand-in: idempotent by operation id, lookup by id, log kept in IndexedDB. */
export class BrowserMailService {
  constructor(
    private readonly database = "durable-agent-demo-mail",
    private readonly delayMs = 700,
  ) {}

  private db() {
    return openDB(this.database, 1, {
      upgrade(db) {
        db.createObjectStore("receipts");
        db.createObjectStore("deliveries", { autoIncrement: true });
      },
    });
  }

  async send(message: { to: string; idempotencyKey: string }): Promise<Receipt> {
    await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    const db = await this.db();
    const tx = db.transaction(["receipts", "deliveries"], "readwrite");
    const known = (await tx.objectStore("receipts").get(message.idempotencyKey)) as Receipt | undefined;
    if (known) {
      await tx.done;
      db.close();
      return known;
    }
    const count = await tx.objectStore("deliveries").count();
    const receipt = { messageId: `msg-${count + 1}`, to: message.to, operationId: message.idempotencyKey };
    await tx.objectStore("receipts").put(receipt, message.idempotencyKey);
    await tx.objectStore("deliveries").add({ to: message.to, operationId: message.idempotencyKey });
    await tx.done;
    db.close();
    return receipt;
  }

  async lookup(operationId: string): Promise<Receipt | undefined> {
    const db = await this.db();
    const receipt = (await db.get("receipts", operationId)) as Receipt | undefined;
    db.close();
    return receipt;
  }

  /** Every delivery that really happened. */
  async deliveries(): Promise<{ to: string; operationId: string }[]> {
    const db = await this.db();
    const all = (await db.getAll("deliveries")) as { to: string; operationId: string }[];
    db.close();
    return all;
  }
}

export function demoRegistry(mail: BrowserMailService): Registry {
  return asyncCampaignRegistry(mail);
}

/** `?scenario=stream`: a model that streams a long answer slowly, for reloading mid-stream. */
export function streamingRegistry(): Registry {
  const model = scriptedModel(
    [
      {
        text: "Here is a long, carefully streamed answer about durable execution: progress lives in committed data, so a reload never loses the work, and text streamed before an interruption is kept as an interrupted record.",
      },
    ],
    { chunkSize: 12, chunkDelayMs: 120, timers: systemTimers },
  );
  return createRegistry({ ...createAgent({ model }) });
}
