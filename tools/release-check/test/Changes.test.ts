import { assert, describe, it } from "@effect/vitest"
import { Changes } from "../src/index.ts"

const packages = [{ name: "@resilience/jitter", dir: "packages/jitter" }, {
  name: "@resilience/schema",
  dir: "packages/schema"
}]
const patterns = ["src/**", "README.md", "tsconfig.build.json"]

describe("Changes.uncovered", () => {
  it("a published file changed with no changeset naming its package", () => {
    assert.deepStrictEqual(
      Changes.uncovered({
        packages,
        changed: ["packages/jitter/src/Jitter.ts", "packages/jitter/test/Jitter.test.ts", "docs/deploy.md"],
        patterns,
        manifestChanged: new Set(),
        named: new Set(["@resilience/schema"])
      }),
      [{ name: "@resilience/jitter", files: ["packages/jitter/src/Jitter.ts"] }]
    )
  })

  it("tests, benches and files outside packages need none; a changeset naming the package covers it", () => {
    const changed = ["packages/jitter/test/Jitter.test.ts", "packages/schema/bench/x.ts", "packages/schema/src/A.ts"]
    const none = { packages, changed, patterns, manifestChanged: new Set<string>() }
    assert.deepStrictEqual(Changes.uncovered({ ...none, named: new Set(["@resilience/schema"]) }), [])
    assert.deepStrictEqual(Changes.uncovered({ ...none, named: new Set() }), [{
      name: "@resilience/schema",
      files: ["packages/schema/src/A.ts"]
    }])
  })

  it("a manifest changed outside devDependencies and scripts counts", () => {
    const before = { name: "a", version: "0.2.0", dependencies: { b: "^1.0.0" }, devDependencies: { c: "1" } }
    const devOnly = { ...before, devDependencies: { c: "2" }, scripts: { test: "vitest" } }
    const reordered = { version: "0.2.0", dependencies: { b: "^1.0.0" }, name: "a" }
    assert.strictEqual(Changes.publishedManifest(devOnly), Changes.publishedManifest(before))
    assert.strictEqual(Changes.publishedManifest(reordered), Changes.publishedManifest(before))
    assert.notStrictEqual(
      Changes.publishedManifest({ ...before, dependencies: { b: "^2.0.0" } }),
      Changes.publishedManifest(before)
    )
    assert.deepStrictEqual(
      Changes.uncovered({
        packages,
        changed: [],
        patterns,
        manifestChanged: new Set(["@resilience/schema"]),
        named: new Set()
      }),
      [{ name: "@resilience/schema", files: ["packages/schema/package.json"] }]
    )
  })

  it("matches the pattern forms of .changeset/config.json", () => {
    assert.isTrue(Changes.matches("src/**", "src/a/b.ts"))
    assert.isFalse(Changes.matches("src/**", "srcs/a.ts"))
    assert.isTrue(Changes.matches("README.md", "README.md"))
    assert.isFalse(Changes.matches("README.md", "docs/README.md"))
    assert.isTrue(Changes.matches("**", "anything/at/all"))
  })
})

describe("Changes.namedBy", () => {
  it("reads the packages of a changeset's front matter, quoted or not", () => {
    const changeset = `---
"@resilience/jitter": minor
'@resilience/schema': patch
@resilience/model: none
---

Adds \`Jitter.thing\`: "@resilience/deriver": major is prose, not front matter.
`
    assert.deepStrictEqual(Changes.namedBy(changeset), [
      "@resilience/jitter",
      "@resilience/schema",
      "@resilience/model"
    ])
    assert.deepStrictEqual(Changes.namedBy("no front matter"), [])
  })
})
