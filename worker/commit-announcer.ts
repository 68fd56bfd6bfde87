/**
 * The leading tab's word to its followers that the session moved: only once some follower said it listens
 * (so a lone tab pays nothing per commit), posted after the current task and coalesced — the caller waiting
 * for its commit's confirmation is answered first, and a burst of commits costs one message.
 */
export class CommitAnnouncer {
  /** Whether some follower tab listens (sticky: followers come and go unannounced). */
  private hasFollowers = false;
  private announced: ReturnType<typeof setTimeout> | undefined;
  private version = 0;

  constructor(
    /** Posts the version to the followers (if this tab still leads). */
    private readonly post: (version: number) => void,
  ) {}

  /** A follower said it listens: it is told the session's version now. */
  heard(version: number | undefined): void {
    this.hasFollowers = true;
    if (version !== undefined) this.announce(version);
  }

  announce(version: number): void {
    this.version = version;
    if (!this.hasFollowers || this.announced !== undefined) return;
    this.announced = setTimeout(() => {
      this.announced = undefined;
      this.post(this.version);
    }, 0);
  }
}
