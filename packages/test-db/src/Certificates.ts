/**
 * Certificates for TLS tests, made with `openssl` in a directory of this process: a self-signed CA and a server
 * certificate it signs for the names given (by default `localhost` only, so that a client that checks the host
 * name accepts `localhost` and refuses `127.0.0.1`). Deleted when the scope closes.
 */
import { Orphans } from "@resilience/local-postgres"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/** A CA and a server certificate it signs: file paths and their PEM text. */
export interface Certificates {
  /** The CA's certificate, what a client gives as `sslrootcert`. */
  readonly caFile: string
  /** The server's certificate and key, PEM. */
  readonly cert: string
  readonly key: string
  readonly certFile: string
  readonly keyFile: string
}

/** How to make them. */
export interface Options {
  /** The server certificate's subjectAltName entries (default `DNS:localhost`). */
  readonly altNames?: ReadonlyArray<string>
  /**
   * The server key's algorithm (default `p256`): `p256` (ECDSA, a cheap handshake) or `rsa2048` (RSA, the
   * costlier server-side signature many public certificates still carry). The CA's key is always P-256.
   */
  readonly serverKey?: "p256" | "rsa2048"
}

const openssl = (args: ReadonlyArray<string>) => execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] })

/** P-256 keys: fast to make, accepted by PostgreSQL, PgBouncer and Node. */
const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

/** RSA-2048 keys: what a server pays more for per handshake (its signature). */
const rsa = ["-newkey", "rsa:2048", "-nodes"]

/** Makes a CA and a server certificate; they are deleted when the scope closes. */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const directory = yield* Effect.acquireRelease(
      Effect.sync(() => Orphans.makeDirectory("certificates")),
      (directory) => Effect.sync(() => Orphans.remove(directory))
    )
    return yield* Effect.sync((): Certificates => {
      const at = (name: string) => join(directory, name)
      openssl([
        "req",
        "-x509",
        ...ec,
        "-keyout",
        at("ca.key"),
        "-out",
        at("ca.crt"),
        "-days",
        "2",
        "-subj",
        "/CN=resilience test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign"
      ])
      openssl([
        "req",
        ...(options.serverKey === "rsa2048" ? rsa : ec),
        "-keyout",
        at("server.key"),
        "-out",
        at("server.csr"),
        "-subj",
        "/CN=localhost"
      ])
      writeFileSync(
        at("server.ext"),
        [
          `subjectAltName=${(options.altNames ?? ["DNS:localhost"]).join(",")}`,
          "basicConstraints=CA:FALSE",
          "keyUsage=critical,digitalSignature,keyEncipherment",
          "extendedKeyUsage=serverAuth"
        ].join("\n") + "\n"
      )
      openssl([
        "x509",
        "-req",
        "-in",
        at("server.csr"),
        "-CA",
        at("ca.crt"),
        "-CAkey",
        at("ca.key"),
        "-CAcreateserial",
        "-out",
        at("server.crt"),
        "-days",
        "2",
        "-extfile",
        at("server.ext")
      ])
      return {
        caFile: at("ca.crt"),
        cert: readFileSync(at("server.crt"), "utf8"),
        key: readFileSync(at("server.key"), "utf8"),
        certFile: at("server.crt"),
        keyFile: at("server.key")
      }
    })
  })
