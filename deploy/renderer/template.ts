/**
 * Renders one template string with the chart subset (for tests and small tools).
 *
 * @example
 * renderTemplate('{{ .Values.name | quote }}', { Values: { name: "x" } }) // => '"x"'
 */
import { Executor } from "./evaluate";
import { createFunctions } from "./functions";
import { parseTemplate } from "./parse";
import { TemplateError } from "./errors";

export function renderTemplate(source: string, data: unknown, name = "inline"): string {
  let parsed: ReturnType<typeof parseTemplate> | undefined;
  const functions = createFunctions({
    include: (n, d) => {
      const body = parsed?.defines.get(n);
      if (!body) throw new TemplateError(`include: no template named ${JSON.stringify(n)}`);
      return new Executor(`define ${n}`, functions).run(body, d);
    },
  });
  parsed = parseTemplate(source, name, (n) => Object.hasOwn(functions, n));
  return new Executor(name, functions).run(parsed.body, data);
}
