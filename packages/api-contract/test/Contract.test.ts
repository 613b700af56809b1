import { assert, describe, it } from "@effect/vitest"
import { Api } from "@resilience/api-contract"
import { Model } from "@resilience/model"
import { OpenApi } from "effect/http-api"
import { spawnSync } from "node:child_process"

// Loads the contract in a fresh Node process and records every module it resolves.
const loadedModules = (): ReadonlyArray<string> => {
  const script = `
    import { registerHooks } from "node:module"
    const urls = []
    registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); urls.push(r.url); return r } })
    await import("@resilience/api-contract")
    process.stdout.write(JSON.stringify(urls))
  `
  const result = spawnSync(
    process.execPath,
    ["--conditions=@resilience/source", "--input-type=module", "-e", script],
    { cwd: new URL("..", import.meta.url), encoding: "utf8" }
  )
  assert.strictEqual(result.status, 0, result.stderr)
  return JSON.parse(result.stdout) as ReadonlyArray<string>
}

describe("api-contract", () => {
  it("loads no server code", () => {
    const modules = loadedModules()
    assert.isTrue(modules.some((url) => url.includes("/api-contract/src/Api.ts")), "the contract itself was loaded")
    const server = modules.filter((url) =>
      // db-session's failure table (Classify, Errors: pure) is what api-errors answers with; nothing else of it.
      /\/db-session\/src\/(?!Classify\.ts$|Errors\.ts$)|\/node_modules\/(pg|postgres|pg-pool)\/|\/platform-node|\/apps\/|node:(net|http)$/
        .test(url)
    )
    assert.deepStrictEqual(server, [])
  })

  it("takes its bodies from the domain's schemas", () => {
    const spec = OpenApi.fromApi(Api.Api)
    const schemas = JSON.stringify(spec)
    // the domain's content limit reaches the OpenAPI document through the contract
    assert.include(schemas, `"maxLength":${Model.maxContentLength}`)
    assert.strictEqual(Api.AppendMessages.fields.messages.value, Model.NewMessage)
  })
})
