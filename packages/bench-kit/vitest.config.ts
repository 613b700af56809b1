import { shared } from "../../vitest.shared.ts"

export default shared()
