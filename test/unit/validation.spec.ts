import 'reflect-metadata';
import { ArgumentMetadata, BadRequestException } from '@nestjs/common';
import { IsInt, IsOptional, IsString, Min } from 'class-validator';
import { validationPipe } from '../../libs/http/src/validation';

class Base {
  @IsOptional() @IsString() model?: string;
}
class Child extends Base {
  @IsInt() @Min(1) n!: number;
}

const body = (metatype: ArgumentMetadata['metatype']): ArgumentMetadata => ({ type: 'body', metatype });
const problem = async (p: Promise<unknown>) => ((await p.then(() => undefined, (e: unknown) => e)) as BadRequestException | undefined)?.message;

/** The validation pipe with class-validator's rule lookup memoized: the same answers, every time. */
describe('validation pipe', () => {
  const pipe = validationPipe();

  it('checks a class and the rules it inherits, the same on every call', async () => {
    for (let i = 0; i < 3; i++) {
      await expect(pipe.transform({ n: 2, model: 'x' }, body(Child))).resolves.toBeInstanceOf(Child);
      expect(await problem(pipe.transform({ n: 0 }, body(Child)))).toBe('cannot parse request: n: n must not be less than 1');
      expect(await problem(pipe.transform({ n: 1, model: 5 }, body(Child)))).toBe('cannot parse request: model: model must be a string');
      expect(await problem(pipe.transform({ model: 5 }, body(Base)))).toBe('cannot parse request: model: model must be a string');
    }
  });

  it('a class defined after the first validations is checked by its own rules', async () => {
    await pipe.transform({ n: 1 }, body(Child));
    class Later {
      @IsString() name!: string;
    }
    expect(await problem(pipe.transform({ name: 3 }, body(Later)))).toBe('cannot parse request: name: name must be a string');
    // And a rule added to an already validated class takes effect.
    IsString()(Child.prototype, 'extra');
    expect(await problem(pipe.transform({ n: 1, extra: 4 }, body(Child)))).toBe('cannot parse request: extra: extra must be a string');
    await expect(pipe.transform({ n: 1, extra: 'ok' }, body(Child))).resolves.toBeInstanceOf(Child);
  });
});
