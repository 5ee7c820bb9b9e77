/**
 * Decodes a request's message before the Connect handler does, so that a
 * malformed message is the client's error (`invalid_argument`), as connect-go
 * answers it, and not `internal`: @connectrpc/connect 2.3.0 maps every parse
 * failure to `internal`, which would page operators for clients' bugs.
 *
 * Covers Connect unary (application/proto, application/json), Connect
 * streaming (application/connect+proto|json) and gRPC-web
 * (application/grpc-web+proto|json) requests: one message, or one uncompressed
 * envelope holding one. Anything it does not recognise goes to the handler
 * untouched; on success the handler gets the same bytes.
 *
 * @example
 * const guard = createRequestGuard(ModelService);
 * const refused = await guard(req); // a Response to send, or a Request to handle
 */
import { type DescMessage, type DescService, fromBinary, fromJson } from "@bufbuild/protobuf";

type Protocol = "connect-unary" | "connect-stream" | "grpc-web";

function protocolOf(contentType: string): { protocol: Protocol; json: boolean } | null {
  const ct = contentType.split(";")[0]!.trim().toLowerCase();
  switch (ct) {
    case "application/proto":
      return { protocol: "connect-unary", json: false };
    case "application/json":
      return { protocol: "connect-unary", json: true };
    case "application/connect+proto":
      return { protocol: "connect-stream", json: false };
    case "application/connect+json":
      return { protocol: "connect-stream", json: true };
    case "application/grpc-web":
    case "application/grpc-web+proto":
      return { protocol: "grpc-web", json: false };
    case "application/grpc-web+json":
      return { protocol: "grpc-web", json: true };
    default:
      return null;
  }
}

/** The message bytes of a body, or why they cannot be had. */
function unwrap(body: Uint8Array, protocol: Protocol): Uint8Array | string {
  if (protocol === "connect-unary") return body;
  if (body.length < 5) return "request body is not one complete envelope";
  const flags = body[0]!;
  const length = new DataView(body.buffer, body.byteOffset, body.byteLength).getUint32(1);
  if (flags !== 0) return `unexpected envelope flags 0x${flags.toString(16)} (compression is not accepted)`;
  if (5 + length !== body.length) return `envelope of ${length} bytes in a body of ${body.length - 5}`;
  return body.subarray(5);
}

function decode(schema: DescMessage, bytes: Uint8Array, json: boolean): string | null {
  try {
    if (json) fromJson(schema, JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes)));
    else fromBinary(schema, bytes);
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

function refuse(protocol: Protocol, message: string): Response {
  const error = { code: "invalid_argument", message };
  if (protocol === "connect-unary") {
    return Response.json(error, { status: 400 });
  }
  if (protocol === "connect-stream") {
    const payload = new TextEncoder().encode(JSON.stringify({ error }));
    const out = new Uint8Array(5 + payload.length);
    out[0] = 0x02; // end-stream
    new DataView(out.buffer).setUint32(1, payload.length);
    out.set(payload, 5);
    return new Response(out, { status: 200, headers: { "content-type": "application/connect+proto" } });
  }
  // gRPC-web trailers-only answer: status in the headers.
  return new Response(null, {
    status: 200,
    headers: { "content-type": "application/grpc-web+proto", "grpc-status": "3", "grpc-message": encodeURIComponent(message) },
  });
}

export function createRequestGuard(service: DescService): (req: Request, path: string) => Promise<Request | Response> {
  const inputs = new Map(service.methods.map((m) => [`/${service.typeName}/${m.name}`, m.input]));
  return async (req, path) => {
    const schema = inputs.get(path);
    const kind = protocolOf(req.headers.get("content-type") ?? "");
    if (!schema || !kind || req.method !== "POST" || req.headers.has("connect-content-encoding") || req.headers.has("content-encoding")) {
      return req;
    }
    const body = new Uint8Array(await req.arrayBuffer());
    const bytes = unwrap(body, kind.protocol);
    const problem = typeof bytes === "string" ? bytes : decode(schema, bytes, kind.json);
    if (problem !== null) return refuse(kind.protocol, `malformed ${schema.typeName}: ${problem}`);
    return new Request(req.url, { method: req.method, headers: req.headers, body, signal: req.signal });
  };
}
