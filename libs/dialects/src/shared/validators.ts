import { registerDecorator, ValidationOptions } from 'class-validator';

export function IsStringOrStringArray(options?: ValidationOptions): PropertyDecorator {
  return (target: object, propertyName: string | symbol) =>
    registerDecorator({
      name: 'isStringOrStringArray',
      target: target.constructor,
      propertyName: String(propertyName),
      options: { message: 'must be a string or an array of strings', ...options },
      validator: {
        validate: (v: unknown) => typeof v === 'string' || (Array.isArray(v) && v.every((s) => typeof s === 'string')),
      },
    });
}

export function IsStringOrObject(options?: ValidationOptions): PropertyDecorator {
  return (target: object, propertyName: string | symbol) =>
    registerDecorator({
      name: 'isStringOrObject',
      target: target.constructor,
      propertyName: String(propertyName),
      options: { message: 'must be a string or an object', ...options },
      validator: { validate: (v: unknown) => typeof v === 'string' || (typeof v === 'object' && v !== null && !Array.isArray(v)) },
    });
}
