// The image's HEALTHCHECK: GET /healthz of whichever app is PID 1 (the API on API_PORT, the deriver on
// DERIVER_METRICS_PORT); exit 0 when it answers 200. Liveness only: /healthz never touches the database.
import { readFileSync } from "node:fs"

const command = readFileSync("/proc/1/cmdline", "utf8")
if (command.includes("migrate.js")) process.exit(0)
const port = command.includes("deriver-app")
  ? (process.env.DERIVER_METRICS_PORT ?? "9464")
  : (process.env.API_PORT ?? "8000")
const response = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) }).catch(
  () => undefined
)
process.exit(response?.status === 200 ? 0 : 1)
