/** The one error type of the chart renderer: a template the subset does not cover, or a failed render. */
export class TemplateError extends Error {
  override readonly name = "TemplateError";
}
