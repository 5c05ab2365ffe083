export { AuthModule } from './auth.module';
export { AuthService, UNAUTHORIZED_MESSAGE, WWW_AUTHENTICATE } from './auth.service';
export { ANONYMOUS } from './caller';
export type { Caller } from './caller';
export { CurrentCaller, CurrentMarking, callerOf, markingOf } from './decorators';
export { parseMarking } from './marking';
export type { Marking } from './marking';
export { localSurfaceRefusal } from './origin';
export type { LocalSurface } from './origin';
