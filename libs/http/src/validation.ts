import { BadRequestException, ValidationError, ValidationPipe } from '@nestjs/common';

/**
 * DTO validation: unknown fields are ignored (spec rule 4); a wrong type is a
 * 400 "cannot parse request: <field>: <problem>".
 */
export function validationPipe(): ValidationPipe {
  return new ValidationPipe({
    transform: true,
    whitelist: false,
    forbidUnknownValues: false,
    transformOptions: { enableImplicitConversion: false },
    exceptionFactory: (errors) => new BadRequestException(`cannot parse request: ${describe(errors)}`),
  });
}

function describe(errors: ValidationError[], prefix = ''): string {
  const out: string[] = [];
  for (const e of errors) {
    const field = prefix ? `${prefix}.${e.property}` : e.property;
    if (e.constraints) out.push(`${field}: ${Object.values(e.constraints)[0]}`);
    if (e.children?.length) out.push(describe(e.children, field));
  }
  return out.filter(Boolean).join('; ');
}
