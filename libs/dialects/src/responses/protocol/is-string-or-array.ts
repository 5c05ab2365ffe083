import { registerDecorator, ValidationOptions } from 'class-validator';

/** `input`: a string or a list of items (each item is checked in the mapper). */
export function IsStringOrArray(options?: ValidationOptions): PropertyDecorator {
  return (target: object, propertyName: string | symbol) =>
    registerDecorator({
      name: 'isStringOrArray',
      target: target.constructor,
      propertyName: String(propertyName),
      options: { message: 'must be a string or an array of input items', ...options },
      validator: { validate: (v: unknown) => typeof v === 'string' || Array.isArray(v) },
    });
}
