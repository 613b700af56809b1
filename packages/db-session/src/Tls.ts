/**
 * TLS to the database, with libpq's meaning of `sslmode` under both drivers: the settings (from a connection
 * URL's query and from options), resolved once at start into the URL and the `ssl` options each driver is
 * handed, and the wording of a TLS failure.
 *
 * - `disable`: no TLS (the default when nothing is set: what both drivers did before).
 * - `prefer`: postgres.js as libpq does (TLS without verification when the server offers it, plain text when it
 *   answers that it has none; `sslrootcert`, `sslcert` and `sslkey` are not used); under `pg` the same as
 *   `require`, because node-postgres cannot continue in plain text on the connection whose TLS request was
 *   refused, and a checkout makes one attempt, never a second one without TLS.
 * - `require`: TLS, certificate not verified; with an `sslrootcert` given, the same as `verify-ca` (libpq).
 * - `verify-ca`: TLS, the server's certificate chain verified against `sslrootcert` (Node's CAs without it, or
 *   with `sslrootcert=system`), its host name not.
 * - `verify-full`: `verify-ca` and the certificate names the host of the URL.
 *
 * The URL's parameters win over the options (which the environment variables fill): the variables are
 * defaults, as `PGSSLMODE` is for libpq.
 *
 * @since 0.2.0
 */
import { Effect, Schema } from "effect"
import { readFileSync } from "node:fs"
import { isIP } from "node:net"
import { checkServerIdentity, type ConnectionOptions } from "node:tls"
import * as Classify from "./Classify.ts"
import { type CheckoutError, DatabaseMisconfigured } from "./Errors.ts"

/**
 * The values of `sslmode`, in libpq's order (weakest first). `allow` is not offered: it means "plain text first,
 * TLS when refused", a second attempt.
 *
 * @since 0.2.0
 * @category constants
 */
export const sslModes = ["disable", "prefer", "require", "verify-ca", "verify-full"] as const

/**
 * `sslmode`: whether to encrypt and what to verify.
 *
 * @since 0.2.0
 * @category schemas
 */
export const SslMode = Schema.Literals(sslModes)

/**
 * `sslmode`.
 *
 * @since 0.2.0
 * @category models
 */
export type SslMode = typeof SslMode.Type

/**
 * The mode when neither the URL nor the options name one: no TLS, as both drivers did before.
 *
 * @since 0.2.0
 * @category defaults
 */
export const defaultMode: SslMode = "disable"

/**
 * TLS settings, with libpq's parameter names; each is also read from the URL's query, which wins.
 *
 * @since 0.2.0
 * @category models
 */
export interface Options {
  readonly sslmode?: SslMode | undefined
  /** File of the CA certificate(s) that sign the server's certificate; `system`: Node's own CAs. */
  readonly sslrootcert?: string | undefined
  /** File of the client certificate, for servers that ask for one. */
  readonly sslcert?: string | undefined
  /** File of the client certificate's private key. */
  readonly sslkey?: string | undefined
}

/**
 * A TLS setting that cannot work: an unknown `sslmode` (pg's `no-verify` included), an `ssl*` parameter this
 * package does not read, an unreadable file, a client key without its certificate. Raised at start, before any
 * connection attempt; shaped and worded as `InvalidParameter` of `@resilience/parameters` (the parameter, the
 * value as given, what is allowed), declared here so that the session's layer needs no other package.
 *
 * @since 0.2.0
 * @category errors
 */
export class InvalidTlsSetting extends Schema.TaggedError<InvalidTlsSetting>()("InvalidTlsSetting", {
  /** `sslmode`, `sslrootcert`, `sslcert`, `sslkey`, or the unsupported parameter. */
  parameter: Schema.String,
  /** The value as given. */
  value: Schema.String,
  /** What is allowed, in words. */
  allowed: Schema.String
}) {
  override get message(): string {
    return `${this.parameter} = ${JSON.stringify(this.value)} is not allowed: expected ${this.allowed}`
  }
}

/**
 * What the drivers are handed: the URL without its `ssl*` parameters (so that neither driver's own parser
 * reinterprets them) and the resolved mode with its Node TLS options.
 *
 * @since 0.2.0
 * @category models
 */
export interface Settings {
  readonly mode: SslMode
  /** The connection URL without `ssl*` query parameters. */
  readonly url: string
  /** Node TLS options for the handshake; `undefined` under `disable`. */
  readonly ssl: ConnectionOptions | undefined
}

/**
 * No TLS: the settings of a URL without `ssl*` parameters and no options.
 *
 * @deprecated since 0.3.0: used nowhere ({@link resolve} returns these settings for such a URL); removed in the
 * next minor release.
 * @since 0.2.0
 * @category decisions
 */
export const disabled = (url: string): Settings => ({ mode: "disable", url, ssl: undefined })

/** The `ssl*` parameters read; any other (`sslpassword`, `sslcrl`, `sslnegotiation`, pg's `ssl`) is refused. */
const known = ["sslmode", "sslrootcert", "sslcert", "sslkey"] as const

const invalid = (parameter: string, value: string, allowed: string) =>
  new InvalidTlsSetting({ parameter, value, allowed })

const isSslMode = (value: string): value is SslMode => (sslModes as ReadonlyArray<string>).includes(value)

/** Splits `url` into itself without `ssl*` parameters and those parameters. */
const split = (
  url: string
): Effect.Effect<{ readonly url: string; readonly params: Options }, InvalidTlsSetting> =>
  Effect.suspend(() => {
    const question = url.indexOf("?")
    if (question < 0) return Effect.succeed({ url, params: {} })
    const hash = url.indexOf("#", question)
    const query = new URLSearchParams(url.slice(question + 1, hash < 0 ? undefined : hash))
    const params: Record<string, string> = {}
    // a copy: the loop deletes from `query`
    for (const [key, value] of Array.from(query)) {
      if (!key.startsWith("ssl")) continue
      if (!(known as ReadonlyArray<string>).includes(key)) {
        return Effect.fail(invalid(key, value, `no ${key} in the URL (the TLS parameters read: ${known.join(", ")})`))
      }
      params[key] = value
      query.delete(key)
    }
    const rest = query.toString()
    const stripped = url.slice(0, question) + (rest === "" ? "" : `?${rest}`) + (hash < 0 ? "" : url.slice(hash))
    return Effect.succeed({ url: stripped, params })
  })

/** The host a `verify-full` certificate must name: the URL's host (brackets of an IPv6 address removed). */
const hostOf = (url: string): string => {
  try {
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1")
    return host === "" ? "localhost" : decodeURIComponent(host)
  } catch {
    return "localhost"
  }
}

const readFile = (parameter: string, path: string): Effect.Effect<string, InvalidTlsSetting> =>
  Effect.try({
    try: () => readFileSync(path, "utf8"),
    catch: (error) =>
      invalid(
        parameter,
        path,
        `a readable PEM file (${error instanceof Error ? error.message : String(error)})`
      )
  })

/**
 * Resolves the TLS settings of a URL and options (the URL's parameters win): an unknown `sslmode`, an
 * unsupported `ssl*` parameter, an unreadable file or a client key without its certificate is an
 * {@link InvalidTlsSetting} naming the parameter, the value and what is allowed.
 *
 * @since 0.2.0
 * @category effects
 */
export const resolve = (
  url: string,
  options: Options = {}
): Effect.Effect<Settings, InvalidTlsSetting> =>
  Effect.gen(function*() {
    const { params, url: stripped } = yield* split(url)
    const given = params.sslmode ?? options.sslmode
    if (given !== undefined && !isSslMode(given)) {
      return yield* invalid(
        "sslmode",
        given,
        `one of ${sslModes.join(", ")}${given === "no-verify" ? " (require encrypts without verifying)" : ""}`
      )
    }
    const rootcert = params.sslrootcert ?? options.sslrootcert
    const certFile = params.sslcert ?? options.sslcert
    const keyFile = params.sslkey ?? options.sslkey
    const requested = given ?? defaultMode
    if (requested === "disable") return disabled(stripped)
    // libpq: with a root certificate given, `require` verifies the chain as `verify-ca` does
    const mode: SslMode = requested === "require" && rootcert !== undefined ? "verify-ca" : requested
    if ((certFile === undefined) !== (keyFile === undefined)) {
      const missing = certFile === undefined ? "sslcert" : "sslkey"
      return yield* invalid(missing, "", `a file, given with ${missing === "sslcert" ? "sslkey" : "sslcert"}`)
    }
    const ca = rootcert === undefined || rootcert === "system" ? undefined : yield* readFile("sslrootcert", rootcert)
    const cert = certFile === undefined ? undefined : yield* readFile("sslcert", certFile)
    const key = keyFile === undefined ? undefined : yield* readFile("sslkey", keyFile)
    const client = { ...(cert === undefined ? {} : { cert }), ...(key === undefined ? {} : { key }) }
    if (mode === "prefer" || mode === "require") {
      return { mode, url: stripped, ssl: { ...client, rejectUnauthorized: false } }
    }
    const host = hostOf(stripped)
    const ssl: ConnectionOptions = {
      ...client,
      ...(ca === undefined ? {} : { ca }),
      rejectUnauthorized: true,
      // SNI carries a name, never an address (RFC 6066 section 3)
      ...(isIP(host) === 0 ? { servername: host } : {}),
      checkServerIdentity: mode === "verify-full"
        ? (_name, certificate) => checkServerIdentity(host, certificate)
        : () => undefined
    }
    return { mode, url: stripped, ssl }
  })

const hint = (code: string | undefined, message: string, mode: SslMode): string => {
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID" || code === "HOSTNAME_MISMATCH") {
    return "the server's certificate does not name the host of the URL: use a name it lists, or sslmode=verify-ca"
  }
  if (/does not support SSL|^SSL required$|no encryption$/i.test(message)) {
    return mode === "disable"
      ? "the server (or its pooler) accepts TLS connections only: set sslmode (require, verify-ca or verify-full)"
      : "the server (or its pooler) does not offer TLS: enable ssl there, or use sslmode=disable"
  }
  if (code !== undefined && /CERT|SIGNATURE|CA$|CRL|LEAF/.test(code)) {
    return "the server's certificate is not trusted: set sslrootcert to the CA certificate that signs it, or use sslmode=require to encrypt without verifying"
  }
  return "the TLS handshake failed"
}

/**
 * A checkout failure worded to name TLS, the certificate and the `sslmode` when the driver's failure (`cause`)
 * is a TLS or certificate failure (a `Tls` row of `Classify.table`, read from the driver's own words): the
 * driver's message and code are kept in it. Any other failure is returned as it is.
 *
 * @since 0.2.0
 * @category decisions
 */
export const explain = (failure: CheckoutError, cause: unknown, mode: SslMode): CheckoutError => {
  const described = Classify.codeAndMessage(cause)
  if (failure._tag !== "DatabaseMisconfigured" || Classify.lookup(described)?.name !== "Tls") return failure
  const code = described.code === undefined ? "" : ` [${described.code}]`
  return new DatabaseMisconfigured({
    code: failure.code,
    elapsedMillis: failure.elapsedMillis,
    message: `TLS to the database failed (sslmode=${mode}): ${described.message}${code}; ${
      hint(described.code, described.message, mode)
    }`
  })
}
