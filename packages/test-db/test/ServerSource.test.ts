import { describe, expect, it } from "@effect/vitest"
import * as ServerSource from "../src/ServerSource.ts"

describe("ServerSource.choose", () => {
  it("takes TEST_DATABASE_URL first, even when a container engine is reachable", () => {
    expect(ServerSource.choose({ testDatabaseUrl: "postgres://u:p@db:5432/x", containerEngineReachable: true }))
      .toEqual({ _tag: "Url", url: "postgres://u:p@db:5432/x" })
  })

  it("uses a container when no URL is set and an engine answers", () => {
    expect(ServerSource.choose({ testDatabaseUrl: undefined, containerEngineReachable: true }))
      .toEqual({ _tag: "Container" })
  })

  it("falls back to embedded PostgreSQL without a URL or an engine", () => {
    expect(ServerSource.choose({ testDatabaseUrl: undefined, containerEngineReachable: false }))
      .toEqual({ _tag: "Embedded" })
  })

  it("takes the build RESILIENCE_POSTGRES_BIN names before a container engine, after TEST_DATABASE_URL", () => {
    const serverBinaries = "/usr/lib/postgresql/15/bin"
    expect(ServerSource.choose({ testDatabaseUrl: undefined, serverBinaries, containerEngineReachable: true }))
      .toEqual({ _tag: "Binaries", directory: serverBinaries })
    expect(
      ServerSource.choose({
        testDatabaseUrl: "postgres://u:p@db:5432/x",
        serverBinaries,
        containerEngineReachable: true
      })
    )
      .toEqual({ _tag: "Url", url: "postgres://u:p@db:5432/x" })
    expect(ServerSource.choose({ testDatabaseUrl: undefined, serverBinaries: " ", containerEngineReachable: false }))
      .toEqual({ _tag: "Embedded" })
  })

  it("treats a blank URL as unset", () => {
    expect(ServerSource.choose({ testDatabaseUrl: "  ", containerEngineReachable: false }))
      .toEqual({ _tag: "Embedded" })
  })
})

describe("ServerSource.engineSocketPath", () => {
  it("defaults to the Docker socket", () => {
    expect(ServerSource.engineSocketPath(undefined)).toBe("/var/run/docker.sock")
  })

  it("follows a unix DOCKER_HOST", () => {
    expect(ServerSource.engineSocketPath("unix:///run/user/1000/podman/podman.sock"))
      .toBe("/run/user/1000/podman/podman.sock")
  })

  it("has no socket for a TCP DOCKER_HOST", () => {
    expect(ServerSource.engineSocketPath("tcp://127.0.0.1:2375")).toBeUndefined()
  })
})
