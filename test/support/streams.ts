/** Reads a stream to its end (a chat transport's chunks, say). */
export async function readAll<T>(stream: ReadableStream<T>): Promise<T[]> {
  const values: T[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return values;
    values.push(value);
  }
}
