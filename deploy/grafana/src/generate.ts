// Writes the dashboards as JSON into ../dashboards (or --out DIR); with
// --check, writes nothing and exits 1 when a committed file differs from
// what the TypeScript source generates.
import * as fs from 'fs';
import * as path from 'path';
import type { Dashboard } from '@grafana/schema';
import { controllerDashboard } from './controller';
import { fabricDashboard } from './fabric';
import { jobsDashboard } from './jobs';

const DASHBOARDS: Record<string, () => Dashboard> = {
  'loom-fabric-overview.json': fabricDashboard,
  'loom-jobs.json': jobsDashboard,
  'loom-controller.json': controllerDashboard,
};

function main(argv: string[]): number {
  const check = argv.includes('--check');
  const outIdx = argv.indexOf('--out');
  const out = outIdx >= 0 ? argv[outIdx + 1] : path.join(__dirname, '..', 'dashboards');
  if (!out) {
    console.error('generate: --out needs a directory');
    return 2;
  }
  let stale = 0;
  for (const [file, build] of Object.entries(DASHBOARDS)) {
    const text = JSON.stringify(build(), null, 2) + '\n';
    const target = path.join(out, file);
    if (check) {
      const have = fs.existsSync(target) ? fs.readFileSync(target, 'utf8') : '';
      if (have !== text) {
        console.error(`generate: ${target} is not what src/ generates; run \`npm run build --prefix deploy/grafana\``);
        stale++;
      }
    } else {
      fs.mkdirSync(out, { recursive: true });
      fs.writeFileSync(target, text);
      console.log(`generate: wrote ${target}`);
    }
  }
  return stale ? 1 : 0;
}

process.exit(main(process.argv.slice(2)));
