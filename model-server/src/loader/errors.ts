/**
 * The loader's one error type. Every problem with a model directory (missing
 * file, bad JSON, missing or mismatched tensor, unsupported architecture or
 * tokenizer) surfaces as a ModelLoadError whose message names the file or
 * tensor, so a bad checkpoint fails at load time with a message a person can act on.
 *
 * @example
 *   try { await loadModel({ dir }) } catch (e) { if (e instanceof ModelLoadError) console.error(e.code, e.message) }
 */
export type ModelLoadErrorCode =
  | "missing_file"
  | "bad_file"
  | "missing_tensor"
  | "shape_mismatch"
  | "unsupported_dtype"
  | "unsupported_model"
  | "unsupported_tokenizer";

export class ModelLoadError extends Error {
  override readonly name = "ModelLoadError";
  constructor(
    readonly code: ModelLoadErrorCode,
    message: string,
  ) {
    super(message);
  }
}
