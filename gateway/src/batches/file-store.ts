/**
 * Uploaded files for the Batch API (`/v1/files`, purpose "batch") and the batches' output files: the bytes on disk
 * under `batches.dir`, their records in memory, each owned by the caller that made it (another caller's id reads as
 * not found). They live as long as the gateway process: a restart forgets them (and removes their bytes; a gateway
 * that was killed leaves its folder, which the next one to start in `dir` removes).
 *
 * @example
 * const files = await createFileStore({ dir: "/var/lib/dispatch/files" });
 * const f = await files.put("", "input.jsonl", "batch", bytes);
 */
import { mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { randomId } from "../responses/items";

export interface FileRecord {
  id: string;
  object: "file";
  bytes: number;
  created_at: number;
  filename: string;
  purpose: string;
  status: "processed";
  expires_at: number | null;
}

/** A file being written line by line (a batch's output): it exists once closed, and only if a line was written. */
export interface FileWriter {
  line(text: string): void;
  close(): Promise<FileRecord | null>;
}

export interface FileStore {
  put(owner: string, filename: string, purpose: string, bytes: Uint8Array): Promise<FileRecord>;
  /** A file written as it goes (nothing of it is held in memory). */
  writer(owner: string, filename: string, purpose: string): FileWriter;
  /** The record, when it exists and belongs to `owner`. */
  get(id: string, owner: string): FileRecord | undefined;
  content(id: string, owner: string): Promise<Uint8Array | undefined>;
  /** `owner`'s files, newest first. */
  list(owner: string, purpose?: string): FileRecord[];
  delete(id: string, owner: string): Promise<boolean>;
  /** Removes every file (the gateway stopping). */
  close(): Promise<void>;
}

/** Whether a process with this id runs (one that is not ours counts as running: its folder is left alone). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

export async function createFileStore(o: { dir: string }): Promise<FileStore> {
  // a folder of this process's own: two gateways sharing `dir` never see each other's files
  const dir = join(o.dir, `gateway-${process.pid}-${randomId("run").slice(4, 16)}`);
  await mkdir(dir, { recursive: true });
  // the folders of gateways that ended without stopping (killed, crashed) hold files nobody can read any more
  for (const name of await readdir(o.dir)) {
    const m = /^gateway-(\d+)-[0-9a-f]+$/.exec(name);
    if (m && Number(m[1]) !== process.pid && !running(Number(m[1]))) await rm(join(o.dir, name), { recursive: true, force: true });
  }
  const records = new Map<string, { owner: string; rec: FileRecord }>();
  const path = (id: string) => join(dir, id);
  const mine = (id: string, owner: string) => {
    const e = records.get(id);
    return e && e.owner === owner ? e.rec : undefined;
  };
  return {
    async put(owner, filename, purpose, bytes) {
      const rec: FileRecord = { id: randomId("file"), object: "file", bytes: bytes.byteLength, created_at: Math.floor(Date.now() / 1000), filename, purpose, status: "processed", expires_at: null };
      await Bun.write(path(rec.id), bytes);
      records.set(rec.id, { owner, rec });
      return rec;
    },
    writer(owner, filename, purpose) {
      const id = randomId("file");
      let sink: ReturnType<ReturnType<typeof Bun.file>["writer"]> | undefined;
      let bytes = 0;
      return {
        line(text) {
          sink ??= Bun.file(path(id)).writer();
          const chunk = `${text}\n`;
          sink.write(chunk);
          bytes += Buffer.byteLength(chunk);
        },
        async close() {
          if (!sink) return null;
          await sink.end();
          const rec: FileRecord = { id, object: "file", bytes, created_at: Math.floor(Date.now() / 1000), filename, purpose, status: "processed", expires_at: null };
          records.set(id, { owner, rec });
          return rec;
        },
      };
    },
    get: mine,
    async content(id, owner) {
      return mine(id, owner) ? new Uint8Array(await Bun.file(path(id)).arrayBuffer()) : undefined;
    },
    list(owner, purpose) {
      return [...records.values()].filter((e) => e.owner === owner && (purpose === undefined || e.rec.purpose === purpose)).map((e) => e.rec).reverse();
    },
    async delete(id, owner) {
      if (!mine(id, owner)) return false;
      records.delete(id);
      await rm(path(id), { force: true });
      return true;
    },
    async close() {
      records.clear();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
