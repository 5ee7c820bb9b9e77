import { describe, expect, test } from "bun:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { GenerateRequestSchema } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import { createRequestGuard } from "./request-guard";

const guard = createRequestGuard(ModelService);
const base = "http://127.0.0.1/dispatch.v1.ModelService";
const post = (method: string, contentType: string, body: Uint8Array | string) =>
  guard(new Request(`${base}/${method}`, { method: "POST", headers: { "content-type": contentType }, body }), `/dispatch.v1.ModelService/${method}`);

function envelope(payload: Uint8Array, flags = 0): Uint8Array {
  const out = new Uint8Array(5 + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, payload.length);
  out.set(payload, 5);
  return out;
}

describe("request guard", () => {
  test("undecodable unary protobuf is a 400 invalid_argument (the library alone says internal)", async () => {
    const res = await post("Health", "application/proto", new Uint8Array([0x0f, 0x01]));
    expect(res).toBeInstanceOf(Response);
    expect((res as Response).status).toBe(400);
    expect(await (res as Response).json()).toMatchObject({ code: "invalid_argument" });
  });

  test("a broken envelope on a stream ends it with invalid_argument", async () => {
    const good = toBinary(GenerateRequestSchema, create(GenerateRequestSchema, { promptTokenIds: [1, 2] }));
    const truncated = envelope(good).subarray(0, 7);
    const res = (await post("Generate", "application/connect+proto", truncated)) as Response;
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(bytes[0]).toBe(0x02);
    expect(JSON.parse(new TextDecoder().decode(bytes.subarray(5)))).toMatchObject({ error: { code: "invalid_argument" } });
  });

  test("gRPC-web gets grpc-status 3; bad JSON is refused too", async () => {
    const web = (await post("Generate", "application/grpc-web+proto", envelope(new Uint8Array([0xff]), 0x01))) as Response;
    expect(web.headers.get("grpc-status")).toBe("3");
    const json = (await post("Health", "application/json", "{not json")) as Response;
    expect(json.status).toBe(400);
  });

  test("a well-formed message passes through with the same bytes", async () => {
    const good = toBinary(GenerateRequestSchema, create(GenerateRequestSchema, { promptTokenIds: [1, 2, 3] }));
    const out = await post("Generate", "application/connect+proto", envelope(good));
    expect(out).toBeInstanceOf(Request);
    expect([...new Uint8Array(await (out as Request).arrayBuffer())]).toEqual([...envelope(good)]);
  });

  test("unknown paths and content types are left to the handler", async () => {
    const req = new Request(`${base}/Nope`, { method: "POST", headers: { "content-type": "application/proto" }, body: "x" });
    expect(await guard(req, "/dispatch.v1.ModelService/Nope")).toBe(req);
  });
});
