// Validates Kubernetes objects offline against the OpenAPI schemas bundled in the npm package
// kubernetes-models: `node validate.mjs objects.json` (a JSON array, as `gpuorch manifests
// --json` prints it). One line per object; exit 1 when any is invalid.
import { readFileSync } from "node:fs";

const objects = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = 0;
for (const obj of objects) {
  const name = `${obj.kind}/${obj.metadata?.name}`;
  try {
    const module = await import(`kubernetes-models/${obj.apiVersion}`);
    const Kind = module[obj.kind];
    if (!Kind) throw new Error(`no model for ${obj.apiVersion} ${obj.kind}`);
    new Kind(obj).validate();
    console.log(`valid ${name}`);
  } catch (e) {
    failed++;
    console.log(`INVALID ${name}: ${e.message.split("\n").join(" ")}`);
  }
}
process.exit(failed ? 1 : 0);
