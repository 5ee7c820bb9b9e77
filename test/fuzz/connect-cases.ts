/**
 * Generated bad input for the model server's Connect API
 * (`dispatch.v1.ModelService`): bad protobuf bytes, broken envelopes (lengths,
 * flags, compression), wrong content types and methods, unknown procedures,
 * JSON variants, and well-formed messages whose fields are out of range (token
 * ids beyond the vocabulary, NaN and huge sampling values, tiny deadlines,
 * unknown models, huge prompts). `expect: "error"` cases must be refused with a
 * Connect code (or the HTTP status the Connect spec gives: 404, 405, 415);
 * `"any"` cases may also be served.
 *
 * @example
 * const cases = generateConnectCases({ seed: 7, count: 600, model: "tiny", vocab: 4096 });
 */
import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { GenerateRequestSchema } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { HealthRequestSchema } from "@dispatch/proto/gen/dispatch/v1/health_pb";
import { WatchLoadRequestSchema } from "@dispatch/proto/gen/dispatch/v1/load_pb";
import { createRng, type Rng } from "./rng";

export interface ConnectCase {
  index: number;
  category: string;
  what: string;
  method: "POST" | "GET" | "PUT";
  path: string;
  headers: Record<string, string>;
  body: Uint8Array | string | null;
  expect: "error" | "any";
}

const SERVICE = "/dispatch.v1.ModelService";
const STREAMS = ["Generate", "WatchLoad", "WatchKvEvents"] as const;
const UNARIES = ["Health", "GetModelInfo"] as const;
const enc = new TextEncoder();

/** One Connect streaming envelope: flags byte, big-endian length, payload. */
export function envelope(payload: Uint8Array, flags = 0, declaredLength = payload.length): Uint8Array {
  const out = new Uint8Array(5 + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, declaredLength >>> 0);
  out.set(payload, 5);
  return out;
}

type GenerateInit = MessageInitShape<typeof GenerateRequestSchema>;

function genReq(model: string, over: GenerateInit = {}): Uint8Array {
  const init: GenerateInit = { requestId: "fuzz", model, promptTokenIds: [1, 2, 3, 4], sampling: { temperature: 0, topP: 1 }, stop: { maxTokens: 2 } };
  return toBinary(GenerateRequestSchema, create(GenerateRequestSchema, Object.assign(init, over)));
}

const streamHeaders = { "content-type": "application/connect+proto", "connect-protocol-version": "1" };
const unaryHeaders = { "content-type": "application/proto", "connect-protocol-version": "1" };

type Gen = (r: Rng) => Omit<ConnectCase, "index" | "category">;

function generators(model: string, vocab: number): Array<[string, Gen]> {
  const gen = (body: Uint8Array, what: string, expect: "error" | "any" = "error", headers: Record<string, string> = streamHeaders) =>
    ({ method: "POST", path: `${SERVICE}/Generate`, headers, body, what, expect }) as const;
  return [
    [
      "bad-protobuf",
      (r) => {
        const m = r.pick([...STREAMS, ...UNARIES]);
        const isStream = (STREAMS as readonly string[]).includes(m);
        // Wire type 7 does not exist, and a length-delimited field running past the end: both undecodable.
        const payload = r.pick([r.bytes(r.int(1, 64)), new Uint8Array([0x0f, 0x01]), new Uint8Array([0x1a, 0xff, 0xff, 0xff, 0x0f, 0x01]), new Uint8Array([0x0a, 0x10, 0x41])]);
        return { method: "POST", path: `${SERVICE}/${m}`, headers: isStream ? streamHeaders : unaryHeaders, body: isStream ? envelope(payload) : payload, what: `${m} with bytes ${Buffer.from(payload.subarray(0, 8)).toString("hex")}`, expect: "any" };
      },
    ],
    [
      "bad-envelope",
      (r) => {
        const ok = genReq(model);
        const kind = r.int(0, 5);
        if (kind === 0) return gen(envelope(ok, 0, r.int(ok.length + 1, 2 ** 31)), "envelope length beyond the body");
        if (kind === 1) return gen(envelope(ok, 0, r.int(0, ok.length - 1)), "envelope length short of the body");
        if (kind === 2) return gen(envelope(ok, 1), "compressed flag without an encoding");
        if (kind === 3) return gen(envelope(ok, 0x02), "end-stream flag on a request");
        if (r.bool(0.2)) return gen(envelope(ok, r.pick([0x80, 0xfc])), "reserved flag bits on a request", "any");
        if (kind === 4) return gen(r.bytes(r.int(0, 4)), "fewer than 5 bytes");
        return gen(new Uint8Array([...envelope(ok), ...envelope(ok)]), "two request messages on a server stream");
      },
    ],
    [
      "content-type",
      (r) => {
        const m = r.pick([...STREAMS, ...UNARIES]);
        const ct = r.pick(["text/plain", "application/json; charset=latin1", "application/grpc+thrift", "", "application/connect+xml", "multipart/form-data"]);
        return { method: "POST", path: `${SERVICE}/${m}`, headers: { "content-type": ct }, body: genReq(model), what: `${m} as '${ct}'`, expect: "error" };
      },
    ],
    [
      "method-path",
      (r) => {
        const kind = r.int(0, 3);
        if (kind === 0) return { method: "GET", path: `${SERVICE}/Generate`, headers: {}, body: null, what: "GET on a server stream", expect: "error" };
        if (kind === 1) return { method: "PUT", path: `${SERVICE}/Health`, headers: unaryHeaders, body: new Uint8Array(), what: "PUT on a unary", expect: "error" };
        if (kind === 2) return { method: "POST", path: `${SERVICE}/${r.string(r.int(1, 20), "abcdefXYZ")}`, headers: unaryHeaders, body: new Uint8Array(), what: "unknown procedure", expect: "error" };
        return { method: "POST", path: `/dispatch.v2.${r.string(6)}/Health`, headers: unaryHeaders, body: new Uint8Array(), what: "unknown service", expect: "error" };
      },
    ],
    [
      "json",
      (r) => {
        const m = r.pick([...STREAMS, ...UNARIES]);
        const isStream = (STREAMS as readonly string[]).includes(m);
        const text = r.pick(["{", "[]", '{"promptTokenIds":"x"}', '{"sampling":{"temperature":"hot"}}', '{"unknownField":1}', "null", '{"intervalMs":-1}', '{"stop":{"maxTokens":1e40}}']);
        const body = isStream ? envelope(enc.encode(text)) : text;
        return { method: "POST", path: `${SERVICE}/${m}`, headers: { "content-type": isStream ? "application/connect+json" : "application/json", "connect-protocol-version": "1" }, body, what: `${m} json ${text}`, expect: "any" };
      },
    ],
    [
      "out-of-range",
      (r) => {
        const cases: Array<[string, GenerateInit, "error" | "any"]> = [
          ["empty prompt", { promptTokenIds: [] }, "error"],
          ["token id = vocab", { promptTokenIds: [1, vocab] }, "error"],
          ["token id 2^32-1", { promptTokenIds: [0xffffffff] }, "error"],
          ["unknown model", { model: r.string(r.int(0, 30)) + "-nope" }, "error"],
          ["negative temperature", { sampling: { $typeName: "dispatch.v1.SamplingParams", temperature: -r.int(1, 100), topP: 1, topK: 0, frequencyPenalty: 0, presencePenalty: 0, logitBias: {} } }, "error"],
          ["NaN temperature", { sampling: { $typeName: "dispatch.v1.SamplingParams", temperature: Number.NaN, topP: 1, topK: 0, frequencyPenalty: 0, presencePenalty: 0, logitBias: {} } }, "error"],
          ["infinite top_p", { sampling: { $typeName: "dispatch.v1.SamplingParams", temperature: 1, topP: Number.POSITIVE_INFINITY, topK: 0, frequencyPenalty: 0, presencePenalty: 0, logitBias: {} } }, "any"],
          ["top_p 5", { sampling: { $typeName: "dispatch.v1.SamplingParams", temperature: 1, topP: 5, topK: 0, frequencyPenalty: 0, presencePenalty: 0, logitBias: {} } }, "any"],
          ["penalty 1e30", { sampling: { $typeName: "dispatch.v1.SamplingParams", temperature: 1, topP: 1, topK: 0, frequencyPenalty: 1e30, presencePenalty: 0, logitBias: {} } }, "error"],
          ["json_schema not JSON", { responseFormat: 2, jsonSchema: "{not json" }, "error"],
          ["json_schema with pattern", { responseFormat: 2, jsonSchema: JSON.stringify({ type: "object", properties: { a: { type: "string", pattern: "x" } } }) }, "error"],
          ["json_schema nested 100 deep", { responseFormat: 2, jsonSchema: `${'{"type": "object", "properties": {"a": '.repeat(100)}{}${"}}".repeat(100)}` }, "error"],
          ["json mode with ignore_eos", { responseFormat: 1, stop: { $typeName: "dispatch.v1.StopConditions", maxTokens: 4, minTokens: 0, stopTokenIds: [], ignoreEos: true } }, "error"],
          ["json mode frame", { responseFormat: 1, jsonPrefix: "<x>", jsonSuffix: "</x>", stop: { $typeName: "dispatch.v1.StopConditions", maxTokens: 4, minTokens: 0, stopTokenIds: [], ignoreEos: false } }, "any"],
          ["priority extremes", { priority: -(2 ** 31) }, "any"],
          ["logit_bias id = vocab", { sampling: { $typeName: "dispatch.v1.SamplingParams", temperature: 1, topP: 1, topK: 0, frequencyPenalty: 0, presencePenalty: 0, logitBias: { [vocab]: 5 } } }, "error"],
          ["logit_bias 1e9", { sampling: { $typeName: "dispatch.v1.SamplingParams", temperature: 0, topP: 1, topK: 0, frequencyPenalty: 0, presencePenalty: 0, logitBias: { 3: 1e9 } } }, "error"],
          ["top_k 2^32-1", { sampling: { $typeName: "dispatch.v1.SamplingParams", temperature: 1, topP: 1, topK: 0xffffffff, frequencyPenalty: 0, presencePenalty: 0, logitBias: {} } }, "any"],
          ["min_tokens > max_tokens", { stop: { $typeName: "dispatch.v1.StopConditions", maxTokens: 2, minTokens: 5, stopTokenIds: [], ignoreEos: false } }, "error"],
          ["max_tokens 2^32-1", { stop: { $typeName: "dispatch.v1.StopConditions", maxTokens: 0xffffffff, minTokens: 0, stopTokenIds: [], ignoreEos: false } }, "any"],
          ["stop id beyond vocab", { stop: { $typeName: "dispatch.v1.StopConditions", maxTokens: 2, minTokens: 0, stopTokenIds: [0xffffffff, vocab + 5], ignoreEos: false } }, "any"],
          ["deadline in the past", { deadlineUnixMs: BigInt(r.int(1, 1_000_000)) }, "any"],
          ["negative deadline", { deadlineUnixMs: -BigInt(r.int(1, 1_000_000)) }, "any"],
          ["top_logprobs 1000", { topLogprobs: 1000 }, "error"],
          ["request id 256 KiB", { requestId: "r".repeat(256 * 1024) }, "any"],
          ["prompt of 200k tokens", { promptTokenIds: Array.from({ length: 200_000 }, (_, i) => i % vocab) }, "error"],
        ];
        const [what, over, expect] = r.pick(cases);
        if (what === "top_k 2^32-1" || what === "max_tokens 2^32-1") over.stop = { $typeName: "dispatch.v1.StopConditions", maxTokens: what === "top_k 2^32-1" ? 2 : 0xffffffff, minTokens: 0, stopTokenIds: [], ignoreEos: false };
        return gen(envelope(genReq(model, over)), what, expect);
      },
    ],
    [
      "watch-args",
      (r) => {
        const load = r.bool();
        const payload = load ? toBinary(WatchLoadRequestSchema, create(WatchLoadRequestSchema, { intervalMs: r.pick([0, 1, 0xffffffff]) })) : toBinary(HealthRequestSchema, create(HealthRequestSchema, {}));
        return { method: "POST", path: `${SERVICE}/${load ? "WatchLoad" : "WatchKvEvents"}`, headers: streamHeaders, body: envelope(payload), what: load ? "WatchLoad extreme interval" : "WatchKvEvents with a Health message", expect: "any" };
      },
    ],
  ];
}

export function generateConnectCases(o: { seed: number; count: number; model: string; vocab: number }): ConnectCase[] {
  const r = createRng(o.seed);
  const gens = generators(o.model, o.vocab);
  return Array.from({ length: o.count }, (_, i) => {
    const [category, g] = gens[i % gens.length]!;
    return { index: i, category, ...g(r) };
  });
}
