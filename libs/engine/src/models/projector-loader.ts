import { Logger } from '@nestjs/common';
import { CatalogEntry } from '../../../store/src/catalog';
import { NativeModel, NativeProjector } from '../backend/native-addon';
import { StartupError } from '../core/errors';

/** What loading a model's projector came to: the projector, or why the model answers without vision. */
export interface ProjectorLoad {
  projector?: NativeProjector;
  /** The refusal image requests get when a store model's projector was skipped. */
  refusal?: string;
}

/**
 * The vision projector beside the weights. One named by -mmproj that cannot serve this model (no
 * projector, another model's width, images larger than a micro-batch) stops the server (exit 2);
 * a store model's is skipped with a warning, the model answers text, and images get a 400 saying why.
 */
export async function loadProjector(entry: CatalogEntry, native: NativeModel, threads: number, nUbatch: number, batchSize: number, log: Logger): Promise<ProjectorLoad> {
  const path = entry.projector!;
  let problem: string;
  try {
    const p = await native.loadProjector(path, { nThreads: threads });
    // Qwen-VL's 2-D positions: an image takes fewer positions than embeddings, which the scheduler's
    // one-token-one-position prompts cannot hold yet.
    if (p.usesMrope) {
      p.dispose();
      problem = 'its model places images on 2-D positions (M-RoPE, as Qwen2-VL), which svc does not support yet';
    } else {
      const tooSmall = await batchTooSmall(p, nUbatch, batchSize).catch((err: Error) => {
        p.dispose();
        throw err;
      });
      if (!tooSmall) {
        log.log(`vision projector ${path} loaded for ${entry.name}`);
        return { projector: p };
      }
      p.dispose();
      // Said at boot: the alternative was vision: true and a 400 "raise -batch-size" for every image.
      if (entry.projectorFlag) throw new StartupError(`flag -batch-size: ${tooSmall}`);
      problem = tooSmall;
    }
  } catch (err) {
    if (err instanceof StartupError) throw err;
    problem = (err as Error).message;
  }
  if (entry.projectorFlag) throw new StartupError(`flag -mmproj: ${problem}`);
  log.warn(`${entry.name} answers without vision: ${problem}`);
  return { refusal: `${entry.name}'s vision projector was not loaded: ${problem}` };
}

/**
 * Why one image cannot be decoded at this -batch-size, or undefined when it can. A projector
 * whose images attend to themselves both ways decodes each in one micro-batch; the positions of
 * one are measured on a small grey image (a fixed count for gemma3: 256).
 */
async function batchTooSmall(p: NativeProjector, nUbatch: number, batchSize: number): Promise<string | undefined> {
  if (!p.nonCausalImages) return undefined;
  const image = Buffer.concat([Buffer.from('P6\n16 16\n255\n'), Buffer.alloc(16 * 16 * 3, 128)]);
  const prompt = await p.tokenize(p.marker, [image], false, true);
  let need = 0;
  try {
    for (const c of prompt.chunks) if (c.type === 'image') need = Math.max(need, c.nTokens);
  } finally {
    prompt.dispose();
  }
  if (need <= nUbatch) return undefined;
  const fix = nUbatch < batchSize ? `micro-batches stop at ${nUbatch} positions, so no -batch-size can` : `-batch-size must be at least ${need} (it is ${batchSize})`;
  return `one image of this projector takes ${need} positions, decoded in one micro-batch: ${fix}`;
}
