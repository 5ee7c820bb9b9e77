/**
 * `npm run test:chaos`: the whole reliability suite, quick and slow parts.
 * Slow files are named `*.chaos.ts` so a plain `bun test` never discovers
 * them; this runner hands them to `bun test` explicitly together with the
 * quick `*.test.ts` files of test/chaos, test/fuzz and test/support.
 *
 *   bun test/chaos/run.ts [--only <substring>] [extra bun test flags...]
 */
import { readdirSync } from "node:fs";
import { join, relative } from "node:path";

const root = join(import.meta.dir, "..", "..");
const dirs = ["test/support", "test/chaos", "test/fuzz"];
const argv = process.argv.slice(2);
const onlyAt = argv.indexOf("--only");
const only = onlyAt >= 0 ? argv.splice(onlyAt, 2)[1] : undefined;

const files = dirs
  .flatMap((d) => readdirSync(join(root, d)).map((f) => join(root, d, f)))
  .filter((f) => f.endsWith(".chaos.ts") || f.endsWith(".test.ts"))
  .filter((f) => !only || f.includes(only))
  .map((f) => `./${relative(root, f)}`)
  .sort();
console.error(`[test:chaos] ${files.length} files: ${files.join(" ")}`);
const proc = Bun.spawn([process.execPath, "test", "--timeout", "120000", ...argv, ...files], { cwd: root, stdio: ["inherit", "inherit", "inherit"] });
process.exit(await proc.exited);
