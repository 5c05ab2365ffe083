import { join } from 'node:path';
import { NativeAddon, NativeModel } from '../../../libs/engine/src/backend/native-addon';
import { ROOT } from './fixtures';

/** The engine itself (the CPU addon the server runs), for checking answers against it. */
export function engineAddon(): NativeAddon {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(join(ROOT, 'build', 'native', 'cpu', 'svc_engine.node')) as NativeAddon;
}

export async function loadEngineModel(path: string): Promise<NativeModel> {
  return engineAddon().loadModel(path);
}

/** Every token id of the vocabulary by its piece (a piece may have several ids: a byte token and a text token). */
export function idsByPiece(model: NativeModel): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (let id = 0; id < model.info.nVocab; id++) {
    const key = model.tokenToPiece(id, false).toString('hex');
    out.set(key, [...(out.get(key) ?? []), id]);
  }
  return out;
}

export function pieceKey(bytes: number[]): string {
  return Buffer.from(bytes).toString('hex');
}
