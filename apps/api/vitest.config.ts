import { shared } from "../../vitest.shared.ts"

// One shared server for the package's files (each suite gets its own database on it), not one per file.
export default shared({ globalSetup: ["../../packages/test-db/src/GlobalSetup.ts"] })
