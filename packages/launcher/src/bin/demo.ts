/** `npm run demo`: see Demo.ts. */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Demo from "../Demo.ts"
import * as Teardown from "../Teardown.ts"

NodeRuntime.runMain(Demo.run({ saturationSeconds: 8 }), { teardown: Teardown.stopIsSuccess })
