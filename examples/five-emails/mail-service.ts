/**
 * A stand-in mail service with its own durable log, which outlives the kernel's crashes (in the demo it
 * is a separate "system"; in tests an object the crashed kernel does not own). Acceptance is idempotent by
 * operation id, and an operation can be looked up by its id — what a real provider's idempotency keys and
 * message lookup give you.
 */
export interface Receipt {
  readonly messageId: string;
  readonly to: string;
  readonly operationId: string;
}

export class MailService {
  /** Every delivery that really happened, in order. */
  readonly deliveries: { to: string; operationId: string }[] = [];
  private readonly byOperation = new Map<string, Receipt>();
  /** Called right after a mail is accepted (tests and the demo crash the kernel here). */
  onAccepted: ((receipt: Receipt, count: number) => void) | undefined;
  /** False while the process that would call us is dead: a dead process sends nothing. */
  reachable = true;

  send(message: { to: string; body: string; idempotencyKey: string }): Receipt {
    if (!this.reachable) throw new Error("mail service unreachable: the caller's process is gone");
    const known = this.byOperation.get(message.idempotencyKey);
    if (known) return known; // a retry with the same key: no second delivery
    const receipt: Receipt = {
      messageId: `msg-${this.deliveries.length + 1}`,
      to: message.to,
      operationId: message.idempotencyKey,
    };
    this.byOperation.set(message.idempotencyKey, receipt);
    this.deliveries.push({ to: message.to, operationId: message.idempotencyKey });
    this.onAccepted?.(receipt, this.deliveries.length);
    return receipt;
  }

  /** The receipt of an operation, if the service accepted it. */
  lookup(operationId: string): Receipt | undefined {
    return this.byOperation.get(operationId);
  }

  /** How many times each recipient got mail. */
  deliveryCounts(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const { to } of this.deliveries) counts.set(to, (counts.get(to) ?? 0) + 1);
    return counts;
  }
}
