import { Module } from '@nestjs/common';
import { ClassifierEncoder } from './classify/classifier-encoder';
import { RouteController } from './route.controller';
import { RouteService } from './route.service';

/** Model routing (POST /v1/route): a message classified, the installed chat models ranked; no chat model is loaded. */
@Module({ controllers: [RouteController], providers: [RouteService, ClassifierEncoder] })
export class RouteModule {}
