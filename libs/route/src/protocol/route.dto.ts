import { Max, IsArray, IsBoolean, IsIn, IsInt, IsOptional, IsString, Min } from 'class-validator';

export const PREFERENCES = ['local', 'best', 'cheap'] as const;
export type Preference = (typeof PREFERENCES)[number];

/** POST /v1/route. Which of messages and text is sent, and the messages' insides, are checked by routeInput(). */
export class RouteRequestDto {
  @IsOptional() @IsArray() messages?: Array<Record<string, unknown>>;
  @IsOptional() @IsString() text?: string;
  /** Pictures attached beside the text. */
  // A bound that no conversation reaches: past it the token estimate lost its precision.
  @IsOptional() @IsInt() @Min(0) @Max(10000) images?: number;
  @IsOptional() @IsBoolean() has_image?: boolean;
  @IsOptional() @IsIn(PREFERENCES) prefer?: Preference;
}
