/**
 * The `data:` payloads of a server-sent-event byte stream, as the OpenAI streaming endpoints send
 * them (`[DONE]` left out), each with the time its chunk arrived: for the serving clients
 * (stream-client.ts, soak-client.ts).
 *
 * @example
 *   for await (const { data, at } of sseData(res.body!)) JSON.parse(data);
 */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<{ data: string; at: number }, void, undefined> {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const bytes of body) {
    const at = performance.now();
    buf += decoder.decode(bytes, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trimEnd();
      buf = buf.slice(nl + 1);
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data !== "[DONE]") yield { data, at };
    }
  }
}
