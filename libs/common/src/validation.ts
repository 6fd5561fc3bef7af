import { ValidationError, ValidationPipe } from '@nestjs/common';
import { ValidateIf } from 'class-validator';
import { ApiError, ErrorCode } from './errors';

/** Flattens class-validator errors into "target_user.username must be a string; …". */
export function describeValidationErrors(errors: ValidationError[], parent = ''): string[] {
  const out: string[] = [];
  for (const error of errors) {
    const path = parent ? `${parent}.${error.property}` : error.property;
    for (const message of Object.values(error.constraints ?? {})) {
      out.push(message.startsWith(error.property) ? path + message.slice(error.property.length) : `${path}: ${message}`);
    }
    if (error.children?.length) out.push(...describeValidationErrors(error.children, path));
  }
  return out;
}

/** Unknown fields are ignored (every body also carries api_key and api_key_secret); known ones are checked. */
export function apiValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    transform: true,
    forbidUnknownValues: false,
    validationError: { target: false, value: false },
    exceptionFactory: (errors) => new ApiError(ErrorCode.InvalidRequest, describeValidationErrors(errors).join('; ')),
  });
}

/** May be omitted, but when present (even null) must pass the other validators: for non-nullable fields. */
export const Settable = () => ValidateIf((_object: object, value: unknown) => value !== undefined);
