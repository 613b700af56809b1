/**
 * The deriver app's layers (for tests and for embedding).
 *
 * @since 0.1.0
 */
export * as App from "./App.ts"
