import { copyFileSync, mkdtempSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { embeddingInputs } from '../../libs/dialects/src/shared/embedding-input';
import { ModelCatalog } from '../../libs/store/src/catalog';
import { fixtureModel, STORIES, syntheticModel } from '../e2e/helpers/fixtures';

describe('embedding inputs', () => {
  it('takes a string or strings, and says what is wrong with the rest', () => {
    expect(embeddingInputs('a', 'input')).toEqual(['a']);
    expect(embeddingInputs(['a', 'b c'], 'input')).toEqual(['a', 'b c']);
    expect(embeddingInputs(undefined, 'input')).toBeUndefined();
    expect(embeddingInputs(null, 'input')).toBeUndefined();
    expect(embeddingInputs([], 'input')).toBeUndefined();
    expect(() => embeddingInputs('', 'prompt')).toThrow('prompt is an empty string: there is nothing to embed');
    expect(() => embeddingInputs(['a', ''], 'input')).toThrow('input[1] is an empty string');
    expect(() => embeddingInputs([5, 6], 'input')).toThrow('input[0] holds token ids; this server embeds text: send strings');
    expect(() => embeddingInputs(['a', [5, 6]], 'input')).toThrow('input[1] holds token ids');
    expect(() => embeddingInputs(7, 'input')).toThrow('input holds token ids');
    expect(() => embeddingInputs(['a', { text: 'b' }], 'input')).toThrow('input must be a string or an array of strings');
    expect(() => embeddingInputs(true, 'input')).toThrow('input must be a string or an array of strings');
  });
});

describe('the catalog with an encoder', () => {
  it('lists -embed after -m, and never makes an encoder the default while a model generates', () => {
    const store = mkdtempSync(join(tmpdir(), 'svc-enc-'));
    const bert = join(store, 'bert.gguf');
    const stories = join(store, 'stories.gguf');
    copyFileSync(syntheticModel('bert-tiny'), bert);
    copyFileSync(fixtureModel(STORIES), stories);
    // The encoder is the newest file: the newest would otherwise be the default.
    utimesSync(stories, new Date(1_000_000_000_000), new Date(1_000_000_000_000));
    const cat = new ModelCatalog({ storeDir: store, ollamaDir: null });
    expect(cat.defaultName()).toBe('stories');
    expect(cat.encoderName()).toBeUndefined();
    expect(cat.list().map((e) => [e.name, e.capabilities])).toEqual(expect.arrayContaining([['bert', ['embeddings']], ['stories', ['completion']]]));

    const other = mkdtempSync(join(tmpdir(), 'svc-enc-'));
    const withFlags = new ModelCatalog({ storeDir: other, ollamaDir: null, defaultModel: stories, encoderModel: bert });
    expect(withFlags.list().map((e) => e.name)).toEqual(['stories', 'bert']);
    expect(withFlags.encoderName()).toBe('bert');
    expect(withFlags.resolve('bert').path).toBe(bert);
    // The same file as both: listed once.
    const same = new ModelCatalog({ storeDir: other, ollamaDir: null, defaultModel: bert, encoderModel: bert });
    expect([same.list().map((e) => e.name), same.encoderName()]).toEqual([['bert'], 'bert']);
    // A store name is kept as given, resolved at use.
    expect(new ModelCatalog({ storeDir: other, ollamaDir: null, encoderModel: 'all-minilm' }).encoderName()).toBe('all-minilm');
  });
});
