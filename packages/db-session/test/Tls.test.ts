/**
 * TLS against a real TLS-only PostgreSQL (`ssl=on`, only `hostssl` lines in `pg_hba.conf`, a server certificate
 * signed by a CA made here for `localhost` only) and through PgBouncer with client TLS, for both drivers: what
 * each `sslmode` does, the same under `pg` and postgres.js.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Cluster } from "@resilience/local-postgres"
import { Certificates, PgBouncer } from "@resilience/test-db"
import { Context, Effect, Layer } from "effect"
import { type CheckoutError, DatabaseMisconfigured, DbSession, InvalidTlsSetting, Tls } from "../src/index.ts"
import { driver as pgDriver } from "../src/internal/PgDriver.ts"
import { driver as postgresDriver } from "../src/internal/PostgresDriver.ts"
import { session } from "./support.ts"

const drivers = { pg: pgDriver, postgres: postgresDriver } as const

/** The TLS-only cluster and the CA that signs its certificate. */
class TlsServer extends Context.Service<TlsServer, {
  readonly cluster: Cluster.Cluster
  readonly certificates: Certificates.Certificates
}>()("test/TlsServer") {
  static readonly layer: Layer.Layer<TlsServer, unknown> = Layer.effect(
    TlsServer,
    Effect.gen(function*() {
      const certificates = yield* Certificates.make()
      const cluster = yield* Cluster.start({
        maxConnections: 20,
        ssl: { cert: certificates.cert, key: certificates.key },
        hba: ["hostssl all all 127.0.0.1/32 scram-sha-256"]
      })
      return TlsServer.of({ cluster, certificates })
    })
  )
}

/** A URL of the cluster (or a pooler's) with another host name and query. */
const at = (url: string, host: string, query: Record<string, string> = {}) => {
  const parsed = new URL(url)
  parsed.hostname = host
  for (const [key, value] of Object.entries(query)) parsed.searchParams.set(key, value)
  return parsed.toString()
}

/** One statement on one checkout: whether the connection is encrypted (PostgreSQL's own `pg_stat_ssl`). */
const encrypted = Effect.gen(function*() {
  const db = yield* DbSession
  const rows = yield* db.query<{ ssl: boolean }>("select ssl from pg_stat_ssl where pid = pg_backend_pid()")
  return rows[0]?.ssl
})

/** One checkout that must fail: its error. */
const refused = Effect.gen(function*() {
  const db = yield* DbSession
  return yield* Effect.flip(db.withConnection(() => Effect.void))
}) as Effect.Effect<CheckoutError, never, DbSession>

const misconfigured = (error: CheckoutError, code: string | undefined, includes: ReadonlyArray<string>) => {
  assert.instanceOf(error, DatabaseMisconfigured, `expected DatabaseMisconfigured, got ${error._tag}: ${error.message}`)
  assert.strictEqual(error.code, code, error.message)
  for (const text of includes) assert.include(error.message, text)
}

/** The codes Node gives a certificate signed by an unknown CA: the server sends its own certificate only. */
const untrusted = ["UNABLE_TO_VERIFY_LEAF_SIGNATURE", "SELF_SIGNED_CERT_IN_CHAIN", "DEPTH_ZERO_SELF_SIGNED_CERT"]

const untrustedCertificate = (error: CheckoutError, mode: Tls.SslMode) => {
  assert.instanceOf(error, DatabaseMisconfigured, `expected DatabaseMisconfigured, got ${error._tag}: ${error.message}`)
  assert.include(untrusted, error.code ?? "", error.message)
  assert.include(error.message, `TLS to the database failed (sslmode=${mode})`)
  assert.include(error.message, "certificate")
  assert.include(error.message, "sslrootcert")
}

describe("Tls.resolve", () => {
  it.effect("takes the ssl* parameters out of the URL and keeps the others", () =>
    Effect.gen(function*() {
      const settings = yield* Tls.resolve(
        "postgres://u:p@db.internal:5432/app?application_name=x&sslmode=require&connect_timeout=3"
      )
      assert.strictEqual(settings.url, "postgres://u:p@db.internal:5432/app?application_name=x&connect_timeout=3")
      assert.strictEqual(settings.mode, "require")
      assert.strictEqual(settings.ssl?.rejectUnauthorized, false)
      const plain = yield* Tls.resolve("postgres://u:p@db/app?sslmode=disable")
      assert.deepStrictEqual(plain, { mode: "disable", url: "postgres://u:p@db/app", ssl: undefined })
    }))

  it.effect("verify-full checks the URL's host and sends it as SNI; verify-ca checks no host", () =>
    Effect.gen(function*() {
      const full = yield* Tls.resolve("postgres://db.internal/app", { sslmode: "verify-full" })
      assert.strictEqual(full.ssl?.servername, "db.internal")
      assert.strictEqual(full.ssl?.rejectUnauthorized, true)
      const ca = yield* Tls.resolve("postgres://127.0.0.1/app?sslmode=verify-ca")
      assert.strictEqual(ca.ssl?.servername, undefined)
      assert.strictEqual(ca.ssl?.checkServerIdentity?.("127.0.0.1", {} as never), undefined)
    }))

  it.effect("a client key without its certificate is refused", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Tls.resolve("postgres://db/app?sslmode=require&sslkey=/k.pem"))
      assert.strictEqual(error.parameter, "sslcert")
    }))
})

layer(TlsServer.layer, { excludeTestServices: true, timeout: "120 seconds" })("TLS", (it) => {
  for (const driver of ["pg", "postgres"] as const) {
    describe(`${driver}, TLS-only server`, () => {
      const connect = <A, E>(
        effect: Effect.Effect<A, E, DbSession>,
        url: string,
        tls?: Tls.Options
      ) => effect.pipe(Effect.provide(session({ url, driver, ...(tls === undefined ? {} : { tls }) })))

      it.effect("disable: refused by the server (no pg_hba.conf entry without encryption), misconfigured", () =>
        Effect.gen(function*() {
          const { cluster } = yield* TlsServer
          const error = yield* connect(refused, at(cluster.url, "127.0.0.1", { sslmode: "disable" }))
          misconfigured(error, "28000", ["no pg_hba.conf entry", "no encryption", "sslmode=disable", "TLS"])
          // no setting at all is disable too
          misconfigured(yield* connect(refused, cluster.url), "28000", ["no encryption"])
        }))

      /** Settings under which a connection is encrypted: the URL's host, its `sslmode`, whether it names the CA. */
      const encryptedUnder: ReadonlyArray<
        { readonly name: string; readonly host: string; readonly sslmode: Tls.SslMode; readonly withCa: boolean }
      > = [
        {
          name: "require: encrypted, the certificate not verified",
          host: "127.0.0.1",
          sslmode: "require",
          withCa: false
        },
        {
          name: `prefer: encrypted (${driver === "pg" ? "as require" : "the server offers TLS"})`,
          host: "127.0.0.1",
          sslmode: "prefer",
          withCa: false
        },
        {
          name: "verify-ca with the CA: ready, whatever the host name (127.0.0.1 is not in the certificate)",
          host: "127.0.0.1",
          sslmode: "verify-ca",
          withCa: true
        },
        {
          name: "verify-full with the CA and a host the certificate names (localhost): ready",
          host: "localhost",
          sslmode: "verify-full",
          withCa: true
        }
      ]
      for (const { host, name, sslmode, withCa } of encryptedUnder) {
        it.effect(name, () =>
          Effect.gen(function*() {
            const { certificates, cluster } = yield* TlsServer
            const query = withCa ? { sslmode, sslrootcert: certificates.caFile } : { sslmode }
            assert.strictEqual(yield* connect(encrypted, at(cluster.url, host, query)), true)
          }))
      }

      it.effect("require with the CA verifies the chain, as libpq does", () =>
        Effect.gen(function*() {
          const { certificates, cluster } = yield* TlsServer
          const url = at(cluster.url, "127.0.0.1", { sslmode: "require", sslrootcert: certificates.caFile })
          assert.strictEqual(yield* connect(encrypted, url), true)
          const other = yield* Certificates.make()
          untrustedCertificate(
            yield* connect(refused, at(cluster.url, "127.0.0.1", { sslmode: "require", sslrootcert: other.caFile })),
            "verify-ca"
          )
        }))

      it.effect("verify-full with the CA and a host the certificate does not name: misconfigured, names the host", () =>
        Effect.gen(function*() {
          const { certificates, cluster } = yield* TlsServer
          const url = at(cluster.url, "127.0.0.1", { sslmode: "verify-full", sslrootcert: certificates.caFile })
          const error = yield* connect(refused, url)
          misconfigured(error, "ERR_TLS_CERT_ALTNAME_INVALID", [
            "TLS to the database failed (sslmode=verify-full)",
            "127.0.0.1",
            "certificate"
          ])
        }))

      for (const mode of ["verify-ca", "verify-full"] as const) {
        it.effect(`${mode} without the CA: misconfigured, names the certificate`, () =>
          Effect.gen(function*() {
            const { cluster } = yield* TlsServer
            untrustedCertificate(yield* connect(refused, at(cluster.url, "localhost", { sslmode: mode })), mode)
          }))
      }

      it.effect("statements interrupted mid-flight over TLS: the connection is destroyed and nothing escapes", () =>
        Effect.gen(function*() {
          const { cluster } = yield* TlsServer
          const tls = yield* Tls.resolve(at(cluster.url, "127.0.0.1", { sslmode: "require" }))
          const connectOptions = { url: tls.url, tls, timeoutMillis: 2000, applicationName: "tls-interrupt" }
          // an error no one handles (a write on a socket the driver closed) would end the process
          const escaped: Array<unknown> = []
          const record = (error: unknown) => escaped.push(error)
          process.on("uncaughtException", record)
          const interrupted: Array<boolean> = []
          for (let i = 0; i < 10; i++) {
            const raw = yield* drivers[driver].connect(connectOptions)
            // what a statement deadline or a shutdown does to a statement in flight: interrupt it
            const exit = yield* Effect.exit(
              Effect.timeout(raw.query("select pg_sleep(0.5)", []), `${20 + i * 10} millis`)
            )
            interrupted.push(exit._tag === "Failure" && !raw.reusable())
            yield* raw.close
            // the destroyed socket's close and the driver's goodbye land within this (an absence check: an escaped
            // error has no event to wait for, so a window in which it would have been thrown)
            yield* Effect.sleep("20 millis")
          }
          // the same absence, once more for the last connections' late errors
          yield* Effect.sleep("200 millis")
          process.removeListener("uncaughtException", record)
          assert.deepStrictEqual(interrupted, Array.from({ length: 10 }, () => true))
          assert.deepStrictEqual(escaped.map(String), [])
        }))

      it.effect("the options (DB_SSL* variables) apply when the URL says nothing; the URL's parameters win", () =>
        Effect.gen(function*() {
          const { certificates, cluster } = yield* TlsServer
          const options = { sslmode: "verify-full", sslrootcert: certificates.caFile } as const
          assert.strictEqual(yield* connect(encrypted, at(cluster.url, "localhost"), options), true)
          const error = yield* connect(refused, at(cluster.url, "localhost", { sslmode: "disable" }), options)
          misconfigured(error, "28000", ["no encryption"])
        }))

      it.effect("an invalid setting fails the layer at start, naming the parameter and the allowed values", () =>
        Effect.gen(function*() {
          const { cluster } = yield* TlsServer
          const mode = yield* Effect.flip(Layer.build(session({ url: `${cluster.url}?sslmode=no-verify`, driver })))
          assert.instanceOf(mode, InvalidTlsSetting)
          assert.strictEqual(mode.parameter, "sslmode")
          assert.strictEqual(
            mode.message,
            "sslmode = \"no-verify\" is not allowed: expected one of disable, prefer, require, verify-ca, verify-full (require encrypts without verifying)"
          )
          const unknown = yield* Effect.flip(Layer.build(session({ url: `${cluster.url}?sslpassword=x`, driver })))
          assert.strictEqual(unknown.parameter, "sslpassword")
          const missing = yield* Effect.flip(
            Layer.build(
              session({ url: cluster.url, driver, tls: { sslmode: "verify-ca", sslrootcert: "/nonexistent" } })
            )
          )
          assert.strictEqual(missing.parameter, "sslrootcert")
          assert.include(missing.message, "/nonexistent")
        }))
    })
  }

  describe("through PgBouncer with client TLS", () => {
    /** PgBouncer in front of the TLS-only cluster: TLS to its clients (`client_tls_sslmode`) and to the server. */
    const bouncer = (clientTls: boolean) =>
      Effect.gen(function*() {
        const { certificates, cluster } = yield* TlsServer
        return yield* PgBouncer.start({
          upstream: cluster,
          maxClientConn: 20,
          poolSize: 2,
          poolMode: "session",
          ...(clientTls ? { clientTls: { sslmode: "require", cert: certificates.cert, key: certificates.key } } : {}),
          settings: { server_tls_sslmode: "require" }
        })
      })

    for (const driver of ["pg", "postgres"] as const) {
      const connect = <A, E>(effect: Effect.Effect<A, E, DbSession>, url: string) =>
        effect.pipe(Effect.provide(session({ url, driver })))

      it.effect.skipIf(PgBouncer.skipReason())(
        `${driver}: require and verify-full ready, disable refused`,
        () =>
          Effect.gen(function*() {
            const { certificates } = yield* TlsServer
            const pooler = yield* bouncer(true)
            const one = Effect.gen(function*() {
              const db = yield* DbSession
              return yield* db.query<{ n: number }>("select 1 as n")
            })
            assert.deepStrictEqual(yield* connect(one, at(pooler.url, "127.0.0.1", { sslmode: "require" })), [{ n: 1 }])
            const full = at(pooler.url, "localhost", { sslmode: "verify-full", sslrootcert: certificates.caFile })
            assert.deepStrictEqual(yield* connect(one, full), [{ n: 1 }])
            untrustedCertificate(
              yield* connect(refused, at(pooler.url, "localhost", { sslmode: "verify-full" })),
              "verify-full"
            )
            const error = yield* connect(refused, at(pooler.url, "127.0.0.1", { sslmode: "disable" }))
            misconfigured(error, "08P01", ["SSL required", "TLS to the database failed (sslmode=disable)"])
          })
      )

      it.effect.skipIf(PgBouncer.skipReason())(
        `${driver}: require against a pooler without TLS: misconfigured, "does not support SSL"`,
        () =>
          Effect.gen(function*() {
            const pooler = yield* bouncer(false)
            const error = yield* connect(refused, at(pooler.url, "127.0.0.1", { sslmode: "require" }))
            misconfigured(error, undefined, [
              "The server does not support SSL connections",
              "TLS to the database failed (sslmode=require)"
            ])
          })
      )
    }
  })
})
