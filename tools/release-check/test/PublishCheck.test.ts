import { assert, describe, it } from "@effect/vitest"
import { PublishCheck } from "../src/index.ts"

const workspaces = new Map<string, PublishCheck.Workspace>([
  ["@resilience/jitter", { version: "0.2.0", private: false }],
  ["@resilience/domain", { version: "0.1.0", private: true }]
])

const manifest: PublishCheck.Manifest = {
  name: "@resilience/schema",
  version: "0.2.0",
  exports: {
    ".": { "@resilience/source": "./src/index.ts", types: "./dist/index.d.ts", default: "./dist/index.js" },
    "./*": { types: "./dist/*.d.ts", default: "./dist/*.js" }
  },
  dependencies: { "@resilience/jitter": "^0.2.0", effect: "^4.1.0" }
}
const files = [
  "package.json",
  "README.md",
  "src/index.ts",
  "dist/index.js",
  "dist/index.d.ts",
  "dist/Gate.js",
  "dist/Gate.d.ts"
]

describe("PublishCheck.problems", () => {
  it("a whole package has none", () => {
    assert.deepStrictEqual(PublishCheck.problems(manifest, files, workspaces), [])
  })

  it("names an export whose file is not in the tarball, and a missing dist/", () => {
    assert.deepStrictEqual(
      PublishCheck.problems(manifest, files.filter((f) => f !== "dist/index.d.ts"), workspaces),
      ["exports points at ./dist/index.d.ts, which is not in the tarball"]
    )
    const problems = PublishCheck.problems(manifest, ["package.json", "src/index.ts", "dist/.tsbuildinfo"], workspaces)
    assert.strictEqual(problems[0], "no dist/ in the tarball (run the build first)")
    assert.include(problems, "exports points at ./dist/*.js, which is not in the tarball")
  })

  it("names main, types and bin that are not in the tarball", () => {
    const problems = PublishCheck.problems(
      { name: "x", version: "1.0.0", main: "dist/main.js", types: "dist/main.d.ts", bin: { x: "./bin/x.js" } },
      ["dist/index.js"],
      workspaces
    )
    assert.deepStrictEqual(problems, [
      "main points at dist/main.js, which is not in the tarball",
      "types points at dist/main.d.ts, which is not in the tarball",
      "bin points at ./bin/x.js, which is not in the tarball"
    ])
  })

  it("names dependencies a registry install cannot resolve", () => {
    const problems = PublishCheck.problems(
      {
        ...manifest,
        dependencies: {
          "@resilience/jitter": "workspace:^",
          "@resilience/domain": "^0.1.0",
          "@resilience/model": "file:../model",
          left: "github:left/pad"
        }
      },
      files,
      workspaces
    )
    assert.deepStrictEqual(problems, [
      "dependency @resilience/jitter@workspace:^ cannot be installed from a registry",
      "dependency @resilience/domain is a private workspace: it is never published",
      "dependency @resilience/model@file:../model cannot be installed from a registry",
      "dependency left@github:left/pad cannot be installed from a registry"
    ])
  })

  it("names a range that does not accept the workspace's version, and a private package", () => {
    assert.deepStrictEqual(
      PublishCheck.problems({ ...manifest, dependencies: { "@resilience/jitter": "^0.1.0" } }, files, workspaces),
      ["dependency @resilience/jitter@^0.1.0 does not accept its version 0.2.0"]
    )
    assert.deepStrictEqual(PublishCheck.problems({ ...manifest, private: true }, files, workspaces), [
      "@resilience/schema is private: it must not be published"
    ])
  })
})

describe("PublishCheck.satisfies", () => {
  it("reads ^ as npm does for 0.x and 0.0.x, ~ and exact versions", () => {
    /** Per range: versions in it, versions outside it. */
    const ranges: ReadonlyArray<
      readonly [range: string, inside: ReadonlyArray<string>, outside: ReadonlyArray<string>]
    > = [
      ["^0.2.0", ["0.2.0", "0.2.5"], ["0.3.0", "0.1.9"]],
      ["^1.2.0", ["1.4.0"], ["2.0.0"]],
      ["^0.0.3", ["0.0.3"], ["0.0.4"]],
      ["~1.2.0", ["1.2.9"], ["1.3.0"]],
      ["0.2.0", ["0.2.0"], ["0.2.1"]]
    ]
    for (const [range, inside, outside] of ranges) {
      for (const version of inside) {
        assert.strictEqual(PublishCheck.satisfies(version, range), true, `${version} in ${range}`)
      }
      for (const version of outside) {
        assert.strictEqual(PublishCheck.satisfies(version, range), false, `${version} not in ${range}`)
      }
    }
    assert.strictEqual(PublishCheck.satisfies("0.2.0", ">=0.1.0"), undefined, "a form it does not read")
  })
})
