import { shared } from "../../vitest.shared.ts"

// No global setup: every test starts the cluster it needs (a saturated one, a closed port), none uses the shared one.
export default shared({ testTimeout: 120_000 })
