import { shared } from "../../vitest.shared.ts"

export default shared({ globalSetup: ["./src/GlobalSetup.ts"] })
