import { shared } from "../../vitest.shared.ts"

export default shared({ globalSetup: ["../../packages/test-db/src/GlobalSetup.ts"], fileParallelism: false })
