import { shared } from "../../vitest.shared.ts"

export default shared({
  globalSetup: ["../test-db/src/GlobalSetup.ts"],
  fileParallelism: false,
  testTimeout: 120_000
})
