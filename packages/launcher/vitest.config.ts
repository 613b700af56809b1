import { shared } from "../../vitest.shared.ts"

export default shared({ globalSetup: ["../../packages/test-db/src/GlobalSetup.ts"], testTimeout: 120_000 })
