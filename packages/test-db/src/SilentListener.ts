/**
 * A TCP listener that accepts connections and never says a word: the server that hangs during startup, for
 * the connect-timeout tests.
 */
import type { Effect, Scope } from "effect"
import * as FakeServer from "./FakeServer.ts"

/** A running silent listener. */
export type SilentListener = FakeServer.FakeServer

/** Starts a silent listener on a free loopback port; it and every accepted socket close with the scope. */
export const start: Effect.Effect<SilentListener, never, Scope.Scope> = FakeServer.start(() => undefined)
